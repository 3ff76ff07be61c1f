package main

import (
	"fmt"
	"strings"
)

// count renders n and a noun, plural unless n is 1: count(1, "shard") is
// "1 shard", count(3, "row group") "3 row groups". Nouns ending in s, x,
// z, sh or ch take "es" ("batches", "matches"), except those whose "ch"
// sounds like k ("epochs", "stomachs"), which English cannot tell from
// the spelling: they are listed in hardCh.
func count[T ~int | ~int64 | ~uint32 | ~uint64](n T, noun string) string {
	if n == 1 {
		return fmt.Sprintf("%d %s", n, noun)
	}
	return fmt.Sprintf("%d %s", n, plural(noun))
}

// plural returns the plural of an English noun (count's rules); the last
// word of a compound ("row group") is the one inflected.
func plural(noun string) string {
	last := noun[strings.LastIndexByte(noun, ' ')+1:]
	if hardCh[strings.ToLower(last)] {
		return noun + "s"
	}
	for _, end := range []string{"s", "x", "z", "sh", "ch"} {
		if strings.HasSuffix(noun, end) {
			return noun + "es"
		}
	}
	return noun + "s"
}

// hardCh are nouns ending in a "ch" pronounced k, whose plural takes "s".
var hardCh = map[string]bool{
	"epoch": true, "stomach": true, "monarch": true, "patriarch": true, "matriarch": true,
	"oligarch": true, "tech": true, "mach": true, "loch": true, "eunuch": true,
}
