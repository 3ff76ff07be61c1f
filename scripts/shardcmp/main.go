// Command shardcmp compares two shard sets made from the same plan, spec and
// source by two builds of prep (scripts/samebytes.sh): every shard's data
// blocks, batch table entries and sample ids must be byte-identical, and so
// must the manifests' plan and source fingerprints, tensors, batch size,
// shard list, empty files and dropped ids. What may differ is the metadata
// that names the build or the spec hash version: the spec hash, the
// manifest's spec text, the tool version, and with them each shard's
// provenance, size and digest. It prints every difference and exits 1 if
// there is any.
//
// Usage: shardcmp OLD_DIR NEW_DIR
package main

import (
	"bytes"
	"fmt"
	"os"
	"reflect"

	"github.com/prepml/prep/shardfmt"
)

func main() {
	if len(os.Args) != 3 {
		fmt.Fprintln(os.Stderr, "usage: shardcmp OLD_DIR NEW_DIR")
		os.Exit(2)
	}
	diffs, shards, batches, err := compare(os.Args[1], os.Args[2])
	if err != nil {
		fmt.Fprintln(os.Stderr, "shardcmp:", err)
		os.Exit(2)
	}
	for _, d := range diffs {
		fmt.Println(d)
	}
	if len(diffs) > 0 {
		fmt.Printf("%d differences\n", len(diffs))
		os.Exit(1)
	}
	fmt.Printf("identical: %d shards, %d batches\n", shards, batches)
}

// compare returns the differences between the shard sets a and b.
func compare(a, b string) (diffs []string, shards, batches int, err error) {
	ma, err := shardfmt.ReadManifest(a)
	if err != nil {
		return nil, 0, 0, err
	}
	mb, err := shardfmt.ReadManifest(b)
	if err != nil {
		return nil, 0, 0, err
	}
	add := func(format string, args ...any) { diffs = append(diffs, fmt.Sprintf(format, args...)) }
	same := func(what string, x, y any) {
		if !reflect.DeepEqual(x, y) {
			add("manifest %s: %v vs %v", what, x, y)
		}
	}
	same("plan_fingerprint", ma.PlanFingerprint, mb.PlanFingerprint)
	same("source_fingerprint", ma.SourceFingerprint, mb.SourceFingerprint)
	same("batch_size", ma.BatchSize, mb.BatchSize)
	same("empty_files", ma.EmptyFiles, mb.EmptyFiles)
	same("dropped", ma.Dropped, mb.Dropped)
	if !shardfmt.SameTensors(ma.Tensors, mb.Tensors) {
		add("manifest tensors: %v vs %v", ma.Tensors, mb.Tensors)
	}
	if len(ma.Shards) != len(mb.Shards) {
		add("manifest lists %d shards vs %d", len(ma.Shards), len(mb.Shards))
		return diffs, 0, 0, nil
	}
	for i, ea := range ma.Shards {
		eb := mb.Shards[i]
		if ea.Path != eb.Path || ea.Epoch != eb.Epoch || ea.Rank != eb.Rank || ea.Batches != eb.Batches {
			add("manifest shard %d: %+v vs %+v", i, ea, eb)
			continue
		}
		n, d, err := compareShard(a+"/"+ea.Path, b+"/"+eb.Path)
		if err != nil {
			return nil, 0, 0, err
		}
		shards++
		batches += n
		for _, s := range d {
			add("%s: %s", ea.Path, s)
		}
	}
	return diffs, shards, batches, nil
}

// compareShard compares the tensors, batch table, sample ids and data
// blocks of two shard files.
func compareShard(a, b string) (batches int, diffs []string, err error) {
	ra, err := shardfmt.Open(a)
	if err != nil {
		return 0, nil, err
	}
	defer ra.Close()
	rb, err := shardfmt.Open(b)
	if err != nil {
		return 0, nil, err
	}
	defer rb.Close()
	if !shardfmt.SameTensors(ra.Tensors(), rb.Tensors()) || !reflect.DeepEqual(ra.Geometry(), rb.Geometry()) {
		return 0, []string{"tensors or geometry differ"}, nil
	}
	if ra.NumBatches() != rb.NumBatches() {
		return 0, []string{fmt.Sprintf("%d batches vs %d", ra.NumBatches(), rb.NumBatches())}, nil
	}
	pa, pb := ra.Provenance(), rb.Provenance()
	pa.SpecHash, pb.SpecHash, pa.ToolVersion, pb.ToolVersion = "", "", "", ""
	if pa != pb {
		diffs = append(diffs, fmt.Sprintf("provenance %+v vs %+v", ra.Provenance(), rb.Provenance()))
	}
	for k := 0; k < ra.NumBatches(); k++ {
		ba, err1 := ra.Batch(k)
		bb, err2 := rb.Batch(k)
		if err1 != nil || err2 != nil {
			return 0, nil, fmt.Errorf("batch %d: %v %v", k, err1, err2)
		}
		if !reflect.DeepEqual(ba, bb) {
			diffs = append(diffs, fmt.Sprintf("batch %d table entry %+v vs %+v", k, ba, bb))
		}
		ia, err1 := ra.SampleIDs(k)
		ib, err2 := rb.SampleIDs(k)
		if err1 != nil || err2 != nil {
			return 0, nil, fmt.Errorf("batch %d ids: %v %v", k, err1, err2)
		}
		if !reflect.DeepEqual(ia, ib) {
			diffs = append(diffs, fmt.Sprintf("batch %d sample ids differ", k))
		}
		xa, err1 := ra.Block(k)
		xb, err2 := rb.Block(k)
		if err1 != nil || err2 != nil {
			return 0, nil, fmt.Errorf("batch %d block: %v %v", k, err1, err2)
		}
		if !bytes.Equal(xa, xb) {
			diffs = append(diffs, fmt.Sprintf("batch %d data block differs", k))
		}
	}
	return ra.NumBatches(), diffs, nil
}
