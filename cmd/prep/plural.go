package main

import "fmt"

// count renders n and a noun, plural unless n is 1: count(1, "shard") is
// "1 shard", count(3, "row group") "3 row groups"; nouns ending in s, x or
// ch take "es" ("batches").
func count[T ~int | ~int64 | ~uint32](n T, noun string) string {
	if n == 1 {
		return fmt.Sprintf("%d %s", n, noun)
	}
	for _, end := range []string{"s", "x", "ch"} {
		if len(noun) >= len(end) && noun[len(noun)-len(end):] == end {
			return fmt.Sprintf("%d %ses", n, noun)
		}
	}
	return fmt.Sprintf("%d %ss", n, noun)
}
