package result

import "testing"

func TestParse(t *testing.T) {
	out := "noise\n" + Prefix + `{"rows":7,"bytes":1024,"seconds":0.5,"extra":"x"}` + "\nmore\n"
	r, ok := Parse(out)
	if !ok || r.Rows != 7 || r.Bytes != 1024 || r.Seconds != 0.5 || r.Extra != "x" {
		t.Fatalf("Parse = %+v, %v", r, ok)
	}
	if _, ok := Parse("no result here\n"); ok {
		t.Fatal("Parse found a result in output without one")
	}
}
