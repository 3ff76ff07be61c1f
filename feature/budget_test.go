package feature

import "testing"

// TestBudgetShares pins the table of budget.go against hand-computed
// shares of a 1 GiB, a 64 MiB and a 2 MiB limit, and the zero Budget's
// default.
func TestBudgetShares(t *testing.T) {
	const mib = int64(1) << 20
	for _, c := range []struct {
		limit                                      int64
		readAhead, after, anon, block, fixed, imgs int64
		docs, checkDecode, checkFetch, parts, pDec int64
	}{
		// 1 GiB: read-ahead capped at 256 MiB (source.DefaultReadAheadBytes).
		{1024 * mib, 256 * mib, 768 * mib, 512 * mib, 256 * mib, 1024 * mib / 22, 256 * mib, 512 * mib, 128 * mib, 64 * mib, 512 * mib, 256 * mib},
		{64 * mib, 16 * mib, 48 * mib, 32 * mib, 16 * mib, 64 * mib / 22, 16 * mib, 32 * mib, 8 * mib, 4 * mib, 32 * mib, 16 * mib},
		// 2 MiB: the jagged block and images keep their 1 MiB floor.
		{2 * mib, mib / 2, 3 * mib / 2, mib, mib, 2 * mib / 22, mib, mib, mib / 4, mib / 8, mib, mib / 2},
	} {
		b := NewBudget(c.limit)
		decode, fetch := b.VerifyCheck(4)
		part, pDec := b.VerifyParts()
		got := []int64{b.ReadAhead(), b.AfterReadAhead().Limit, b.Anon(), b.JaggedBlock(), b.FixedListRowEntries(), b.Images(),
			b.PackedDocuments(), decode, fetch, part, pDec}
		want := []int64{c.readAhead, c.after, c.anon, c.block, c.fixed, c.imgs, c.docs, c.checkDecode, c.checkFetch, c.parts, c.pDec}
		names := []string{"ReadAhead", "AfterReadAhead", "Anon", "JaggedBlock", "FixedListRowEntries", "Images", "PackedDocuments", "VerifyCheck decode", "VerifyCheck prefetch", "VerifyParts part", "VerifyParts decode"}
		for i := range got {
			if got[i] != want[i] {
				t.Errorf("limit %d: %s = %d, want %d", c.limit, names[i], got[i], want[i])
			}
		}
		if h := b.Heap(c.anon); h != c.limit-c.anon || b.Decode(h) != h/2 || b.JaggedInFlight(h) != max(c.block, h/2) {
			t.Errorf("limit %d: heap %d, decode %d, jagged in flight %d", c.limit, h, b.Decode(h), b.JaggedInFlight(h))
		}
		if pd := b.PackedDecode(); pd.Memory != c.docs || pd.Run != c.limit {
			t.Errorf("limit %d: PackedDecode = %+v", c.limit, pd)
		}
	}
	if b := (Budget{}); b.Anon() != DefaultMemoryLimit/2 || NewBudget(0).Limit != DefaultMemoryLimit || NewBudget(-1).Limit != 1<<30 {
		t.Errorf("zero budget: anon %d, limit %d", b.Anon(), NewBudget(0).Limit)
	}
}
