package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/prepml/prep/plan"
	"github.com/prepml/prep/source"
)

// mixSummary is the mixture part of prep plan --json.
type mixSummary struct {
	EpochSamples uint64          `json:"epoch_samples"`
	Sources      []mixSourceInfo `json:"sources"`
}

// mixSourceInfo is one source of a mixture as prep plan reports it.
type mixSourceInfo struct {
	Name            string   `json:"name"`
	Weight          string   `json:"weight"` // as written; "rows" when none
	Paths           []string `json:"paths"`
	Files           int      `json:"files"`
	Rows            uint64   `json:"rows"`
	SamplesPerEpoch uint64   `json:"samples_per_epoch"`
	// Share is samples_per_epoch / epoch_samples; Passes is
	// samples_per_epoch / rows: above 1 the source is up-sampled (its rows
	// repeat within an epoch), below 1 down-sampled (it takes 1/passes
	// epochs to draw every row).
	Share  float64 `json:"share"`
	Passes float64 `json:"passes_per_epoch"`
}

// discoverMixture reads the sources file and every source's footers, and
// returns the combined source and the mixture (not yet resolved). Errors
// name the source; a bad sources file is a usage error.
func discoverMixture(ctx context.Context, path string, io *s3Flags) (plan.Source, *plan.Mixture, []*s3Source, error) {
	sf, err := source.ReadSourcesFile(path)
	if err != nil {
		return plan.Source{}, nil, nil, usagef("--sources: %v", err)
	}
	var remotes []*s3Source
	var parts []plan.Source
	var names []string
	for _, s := range sf.Sources {
		if s.Filter != "" {
			return plan.Source{}, nil, nil, usagef("--sources: %s:%d: source %s: row filters are not supported by this build of prep (remove the filter key)", sf.Path, s.Line, s.Name)
		}
		src, remote, err := discoverSources(ctx, s.Paths, io)
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
		parts, names = append(parts, src), append(names, s.Name)
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
		mix.Sources = append(mix.Sources, plan.MixSource{Name: s.Name, Weight: s.Weight, Paths: s.Paths, Files: files[i]})
	}
	return src, mix, remotes, nil
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
func summarizeMixture(p *plan.Plan) *mixSummary {
	m := p.Mixture
	if m == nil {
		return nil
	}
	s := &mixSummary{EpochSamples: m.EpochSamples, Sources: []mixSourceInfo{}}
	for _, ms := range m.Sources {
		w := ms.Weight
		if w == "" {
			w = "rows"
		}
		s.Sources = append(s.Sources, mixSourceInfo{
			Name: ms.Name, Weight: w, Paths: ms.Paths, Files: len(ms.Files), Rows: ms.Rows, SamplesPerEpoch: ms.SamplesPerEpoch,
			Share:  float64(ms.SamplesPerEpoch) / float64(m.EpochSamples),
			Passes: float64(ms.SamplesPerEpoch) / float64(ms.Rows),
		})
	}
	return s
}

// writeMixture renders the mixture summary as text lines.
func writeMixture(w io.Writer, s *mixSummary) {
	fmt.Fprintf(w, "  mixture          %d samples per epoch from %s\n", s.EpochSamples, count(len(s.Sources), "source"))
	for _, ms := range s.Sources {
		fmt.Fprintf(w, "    %-14s weight %s: %d of %d rows per epoch (%.4f of each epoch, %.3f passes; %s)\n",
			ms.Name, ms.Weight, ms.SamplesPerEpoch, ms.Rows, ms.Share, ms.Passes, strings.Join(ms.Paths, ", "))
	}
}
