package plan

import (
	"regexp"
	"time"
)

// The values of "date" and "timestamp" partition keys (PartitionKey), as
// selection types them at plan time and convert writes them as tensors.

// ParsePartitionDate parses a calendar date as DuckDB casts text to DATE in a hive
// partition value or a filter literal: Y-M-D with a year of 2 to 9 digits
// (value 0 to 9999; "26-11-01" is the year 26), a month and a day of 1 or 2
// digits each ("2026-11-1" is 2026-11-01), proleptic Gregorian calendar. It
// returns days since 1970-01-01 (negative before). ok is false for any
// other text, including an impossible date such as 2026-02-30 (which
// DuckDB leaves VARCHAR too). Forms DuckDB also reads as dates but prep
// does not (a sign, white space around, a 5-digit year) are refused at
// inference (selection.DateLike).
func ParsePartitionDate(s string) (days int64, ok bool) {
	y, m, d, rest, ok := parseYMD(s)
	if !ok || rest != "" {
		return 0, false
	}
	return civilDays(y, m, d)
}

// ParsePartitionTimestamp parses a timestamp without time zone as DuckDB casts text
// to TIMESTAMP: a date as ParsePartitionDate reads it, alone (midnight) or followed
// by ' ' or 'T' and H:M, H:M:S or H:M:S.F (hour 0-23, minute and second
// 0-59, each of 1 or 2 digits; F 1 to 6 digits of fraction). It returns
// microseconds since 1970-01-01 00:00:00. ok is false for any other text,
// including a time zone or offset suffix ('Z', '+02'): DuckDB drops it
// silently where prep refuses the value (selection.DateLike).
func ParsePartitionTimestamp(s string) (micros int64, ok bool) {
	y, m, d, rest, ok := parseYMD(s)
	if !ok {
		return 0, false
	}
	days, ok := civilDays(y, m, d)
	if !ok {
		return 0, false
	}
	us := days * 86400e6
	if rest == "" {
		return us, true
	}
	mt := timeOfDay.FindStringSubmatch(rest)
	if mt == nil {
		return 0, false
	}
	h, mi, sec := atoi(mt[1]), atoi(mt[2]), 0
	if mt[3] != "" {
		sec = atoi(mt[3])
	}
	if h > 23 || mi > 59 || sec > 59 {
		return 0, false
	}
	frac := 0
	if f := mt[4]; f != "" {
		frac = atoi(f)
		for i := len(f); i < 6; i++ {
			frac *= 10
		}
	}
	return us + int64(h)*3600e6 + int64(mi)*60e6 + int64(sec)*1e6 + int64(frac), true
}

var (
	ymd       = regexp.MustCompile(`^([0-9]{2,9})-([0-9]{1,2})-([0-9]{1,2})`)
	timeOfDay = regexp.MustCompile(`^[ T]([0-9]{1,2}):([0-9]{1,2})(?::([0-9]{1,2})(?:\.([0-9]{1,6}))?)?$`)
)

// parseYMD splits s into its Y-M-D prefix (ParsePartitionDate's form) and the rest.
func parseYMD(s string) (y, m, d int, rest string, ok bool) {
	mt := ymd.FindStringSubmatch(s)
	if mt == nil {
		return 0, 0, 0, "", false
	}
	y, m, d = atoi(mt[1]), atoi(mt[2]), atoi(mt[3])
	return y, m, d, s[len(mt[0]):], y <= 9999
}

// civilDays is the day number of y-m-d (days since 1970-01-01); ok is
// false for an impossible date.
func civilDays(y, m, d int) (int64, bool) {
	t := time.Date(y, time.Month(m), d, 0, 0, 0, 0, time.UTC)
	if t.Year() != y || int(t.Month()) != m || t.Day() != d {
		return 0, false
	}
	return t.Unix() / 86400, true // UTC midnight: a whole number of days
}

// atoi is the value of a string of at most 9 ASCII digits.
func atoi(s string) int {
	n := 0
	for _, c := range s {
		n = n*10 + int(c-'0')
	}
	return n
}
