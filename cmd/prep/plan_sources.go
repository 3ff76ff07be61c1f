package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime/debug"
	"strings"

	"github.com/prepml/prep/plan"
	"github.com/prepml/prep/selection"
	"github.com/prepml/prep/source"
)

// mixSummary is the mixture part of prep plan --json.
type mixSummary struct {
	EpochSamples uint64          `json:"epoch_samples"`
	Sources      []mixSourceInfo `json:"sources"`
	// PackedDocuments: the mixture draws documents that are packed into
	// rows (PLAN.md §12.1); its counts are documents, not samples.
	PackedDocuments bool `json:"packed_documents,omitempty"`
}

// mixSourceInfo is one source of a mixture as prep plan reports it.
type mixSourceInfo struct {
	Name   string `json:"name"`
	Weight string `json:"weight"` // as written; "rows" when none
	Filter string `json:"filter,omitempty"`
	// SelectionDigest pins the rows the filter selected (PLAN.md §11.7).
	SelectionDigest string `json:"selection_digest,omitempty"`
	// FilterBytesRead is what evaluating the filter read from the files
	// (footers and the filter columns' chunks); 0 without a filter.
	FilterBytesRead int64 `json:"filter_bytes_read,omitempty"`
	// FilterPagesRead and FilterPagesSkipped count the data pages of the
	// filter columns whose page index was used: read, and skipped unread
	// because no row of theirs can match (selection.Result); 0 without a
	// page index.
	FilterPagesRead    int64 `json:"filter_pages_read,omitempty"`
	FilterPagesSkipped int64 `json:"filter_pages_skipped,omitempty"`
	// Partitions are the source's hive partition keys and their types,
	// in level order (plan.MixSource.Partitions).
	Partitions      []plan.PartitionKey `json:"partitions,omitempty"`
	Paths           []string            `json:"paths"`
	Files           int                 `json:"files"`
	Rows            uint64              `json:"rows"`
	SamplesPerEpoch uint64              `json:"samples_per_epoch"`
	// Share is samples_per_epoch / epoch_samples; Passes is
	// samples_per_epoch / rows: above 1 the source is up-sampled (its rows
	// repeat within an epoch), below 1 down-sampled (it takes 1/passes
	// epochs to draw every row).
	Share  float64 `json:"share"`
	Passes float64 `json:"passes_per_epoch"`
}

// discoverMixture reads the sources file and every source's footers, and
// returns the combined source and the mixture (not yet resolved). Its
// packing block, when it has one, goes to *packing, which must then be
// nil (a packing given with --pack too is a usage error, before any
// footer is read). Errors name the source; a bad sources file is a usage
// error.
func discoverMixture(ctx context.Context, path string, io *s3Flags, memory int64, filterCosts map[string]filterCost, packing **plan.PackOptions) (plan.Source, *plan.Mixture, []*s3Source, error) {
	sf, err := source.ReadSourcesFile(path)
	if err != nil {
		return plan.Source{}, nil, nil, usagef("--sources: %v", err)
	}
	if sf.Packing != nil {
		if *packing != nil {
			return plan.Source{}, nil, nil, usagef("--pack with a sources file that has a packing block: give the packing once, in the file or with --pack")
		}
		*packing = sf.Packing
	}
	var remotes []*s3Source
	var parts []plan.Source
	var names []string
	var sels []*selection.Result
	var keys [][]plan.PartitionKey
	for _, s := range sf.Sources {
		var (
			src    plan.Source
			remote *s3Source
			err    error
			hive   *selection.Hive
		)
		if hive, err = selection.HiveDir(s); err != nil {
			return plan.Source{}, nil, remotes, usagef("source %s: %v", s.Name, err)
		}
		if hive != nil {
			var c *source.S3Client
			src, c, err = hive.Discover(ctx, s, io.options())
			if c != nil {
				remote = &s3Source{client: c}
			}
			if errors.Is(err, selection.ErrHiveSource) {
				err = usagef("%v", err)
			}
		} else {
			src, remote, err = discoverSources(ctx, s.Paths, io)
		}
		if remote != nil {
			remotes = append(remotes, remote)
		}
		if err != nil {
			var ue usageError
			if errors.As(err, &ue) {
				return plan.Source{}, nil, remotes, usagef("source %s: %v", s.Name, ue.err)
			}
			return plan.Source{}, nil, remotes, fmt.Errorf("source %s: reading footers: %w", s.Name, err)
		}
		var sel *selection.Result
		if s.Filter != "" {
			setFilterGCPercent()
			var c filterCost
			if sel, c, err = selectRows(ctx, src, s, io, memory, hive); err != nil {
				return plan.Source{}, nil, remotes, err
			}
			filterCosts[s.Name] = c
		}
		parts, names, sels, keys = append(parts, src), append(names, s.Name), append(sels, sel), append(keys, hive.PartitionKeys())
	}
	src, files, err := source.Combine(names, parts)
	if err != nil {
		if errors.Is(err, source.ErrSourcesFile) {
			return plan.Source{}, nil, remotes, usagef("--sources %s: %v", sf.Path, err)
		}
		return plan.Source{}, nil, remotes, err
	}
	mix := &plan.Mixture{EpochSamples: sf.EpochSamples}
	for i, s := range sf.Sources {
		mix.Sources = append(mix.Sources, plan.MixSource{Name: s.Name, Weight: s.Weight, Paths: s.Paths, Files: files[i], Filter: s.Filter, Partitions: keys[i]})
		if sels[i] != nil {
			mix.Sources[i].SetSelectionUvarints(sels[i].Uvarints(), sels[i].Size(), sels[i].Selected)
		}
	}
	return src, mix, remotes, nil
}

// filterGCPercent is the garbage collector's target (as GOGC) of a plan
// that evaluates row filters, from the first filter on: its heap is mostly
// a few large buffers without pointers (decoded windows, selected ranges,
// the selection's text and ids table), cheap to mark, and each page the
// heap grows by is touched for the first time, a page fault (about 10 µs
// on a VM). Collecting once the heap has grown by a quarter reuses pages
// where the default, letting it double, takes new ones: on the filter
// benchmark about 13 700 page faults and 0.60 CPU-s a run against 19 300
// and 0.66 at 100.
const filterGCPercent = 25

// setFilterGCPercent sets the collector's target to filterGCPercent,
// unless GOGC is set (the user's choice stands).
func setFilterGCPercent() {
	if os.Getenv("GOGC") == "" {
		debug.SetGCPercent(filterGCPercent)
	}
}

// selectRows evaluates spec's filter over the source src (its files in
// path order) and returns the rows it selected (at least one). A
// bad filter or one that selects nothing is a usage error naming the
// source and the token.
func selectRows(ctx context.Context, src plan.Source, spec source.SourceSpec, io *s3Flags, memory int64, hive *selection.Hive) (*selection.Result, filterCost, error) {
	var st source.Store
	if source.IsS3URL(src.Root) {
		remote, err := openS3(ctx, src.Root, io, readAheadShare(memory))
		if err != nil {
			return nil, filterCost{}, err
		}
		defer remote.close()
		st = remote.store
	} else {
		local, err := source.NewLocal(src.Root)
		if err != nil {
			return nil, filterCost{}, err
		}
		st = local
	}
	files := make([]selection.File, len(src.Files))
	part, values := hive.Partitions()
	for i, f := range src.Files {
		files[i] = selection.File{Path: f.Path, RowGroups: f.RowGroups}
		if part != nil {
			files[i].Partition = values(src.Root, f.Path)
		}
	}
	// The decoded filter columns take half of --memory-limit (the rest:
	// footers, read-ahead, the evaluation's vectors).
	_, res, err := selection.Select(ctx, st, files, spec.Filter, memory/2, part)
	switch {
	case errors.Is(err, selection.ErrFilter):
		return nil, filterCost{}, usagef("source %s: filter: %v", spec.Name, err)
	case err != nil:
		return nil, filterCost{}, fmt.Errorf("source %s: evaluating its filter: %w", spec.Name, err)
	case res.Selected == 0:
		return nil, filterCost{}, usagef("source %s: filter %q selects no row of its %d files: nothing to draw from", spec.Name, spec.Filter, len(files))
	}
	return res, filterCost{Bytes: res.BytesRead, PagesRead: res.PagesRead, PagesSkipped: res.PagesSkipped}, nil
}

// filterCost is what evaluating one source's filter read: bytes, and the
// pages of the filter columns with a page index read and skipped
// (selection.Result).
type filterCost struct {
	Bytes, PagesRead, PagesSkipped int64
}

// sumStats adds up the object-store traffic of several sources (nil when
// none is remote).
func sumStats(rs []*s3Source) *source.S3Stats {
	var out *source.S3Stats
	for _, r := range rs {
		st := r.stats()
		if st == nil {
			continue
		}
		if out == nil {
			out = &source.S3Stats{}
		}
		out.Requests += st.Requests
		out.Retries += st.Retries
		out.BytesFetched += st.BytesFetched
		out.BytesNeeded += st.BytesNeeded
	}
	return out
}

// summarizeMixture returns the --json mixture summary of p (nil without a
// mixture).
func summarizeMixture(p *plan.Plan, filterCosts map[string]filterCost) *mixSummary {
	m := p.Mixture
	if m == nil {
		return nil
	}
	s := &mixSummary{EpochSamples: m.EpochSamples, Sources: []mixSourceInfo{}, PackedDocuments: p.Packing != nil}
	for _, ms := range m.Sources {
		w := ms.Weight
		if w == "" {
			w = "rows"
		}
		s.Sources = append(s.Sources, mixSourceInfo{
			Name: ms.Name, Weight: w, Filter: ms.Filter, SelectionDigest: ms.SelectionDigest, Paths: ms.Paths, Files: len(ms.Files), Rows: ms.Rows, SamplesPerEpoch: ms.SamplesPerEpoch,
			FilterBytesRead: filterCosts[ms.Name].Bytes, FilterPagesRead: filterCosts[ms.Name].PagesRead, FilterPagesSkipped: filterCosts[ms.Name].PagesSkipped,
			Partitions: ms.Partitions,
			Share:      float64(ms.SamplesPerEpoch) / float64(m.EpochSamples),
			Passes:     float64(ms.SamplesPerEpoch) / float64(ms.Rows),
		})
	}
	return s
}

// writeMixture renders the mixture summary as text lines.
func writeMixture(w io.Writer, s *mixSummary) {
	unit := "samples per epoch"
	if s.PackedDocuments {
		unit = "documents per epoch, each epoch packing its own"
	}
	fmt.Fprintf(w, "  mixture          %d %s from %s\n", s.EpochSamples, unit, count(len(s.Sources), "source"))
	for _, ms := range s.Sources {
		rows := "rows"
		if ms.Filter != "" {
			rows = "selected rows"
		}
		fmt.Fprintf(w, "    %-14s weight %s: %d of %d %s per epoch (%.4f of each epoch, %.3f passes; %s)\n",
			ms.Name, ms.Weight, ms.SamplesPerEpoch, ms.Rows, rows, ms.Share, ms.Passes, strings.Join(ms.Paths, ", "))
		if ms.Filter != "" {
			pages := ""
			if ms.FilterPagesSkipped > 0 {
				pages = fmt.Sprintf("; %d pages read, %d skipped by the page index", ms.FilterPagesRead, ms.FilterPagesSkipped)
			}
			fmt.Fprintf(w, "    %-14s filter %s (read %s%s)\n", "", ms.Filter, formatBytes(ms.FilterBytesRead), pages)
		}
		if len(ms.Partitions) > 0 {
			var ks []string
			for _, k := range ms.Partitions {
				ks = append(ks, k.Key+" "+k.Type)
			}
			fmt.Fprintf(w, "    %-14s partitions %s\n", "", strings.Join(ks, ", "))
		}
	}
}
