// Command imagebench measures prep convert's image policy (feature/SPEC.md
// §2.8) and writes the "Images" section into bench/image-results.md
// (-section), which bench/cmd/benchrun includes in every BENCHMARKS.md it
// renders, and into BENCHMARKS.md itself (between the markers
// <!-- imagebench:begin --> and <!-- imagebench:end -->, appended when
// absent):
//
//   - images per second per core: prep convert of -n 256x256 JPEGs (quality
//     90, 4:2:0, Go's encoder) in a Parquet binary column to U8 [224, 224, 3]
//     (resize shorter-side, bilinear; the whole run: plan read, Parquet
//     decode, JPEG decode, resize, staging, shard writes) under --jobs 1 and
//     --jobs 2, against Pillow's Image.open + convert("RGB") +
//     resize((224, 224), BILINEAR) + numpy.asarray of the same JPEG bytes in
//     one /usr/bin/python3 process (one core; decode and resize only),
//     in the same run;
//   - disk bytes of the shard set against the source Parquet file.
//
// Every figure is the median of -runs runs made in this process's run.
package main

import (
	"bytes"
	"flag"
	"fmt"
	"image"
	"image/color"
	"image/jpeg"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/parquet-go/parquet-go"
)

type row struct {
	ID    int64  `parquet:"id"`
	Image []byte `parquet:"image"`
}

const spec = `tensors:
  - name: image
    column: image
    image: {size: [224, 224], resize: shorter-side, filter: bilinear}
  - name: id
    column: id
    dtype: I64
`

const pilScript = `import io, sys, time
import numpy as np
from PIL import Image
d = sys.argv[1]
names = sorted(n for n in __import__("os").listdir(d) if n.endswith(".jpg"))
data = [open(d + "/" + n, "rb").read() for n in names]
t, c = time.perf_counter(), time.process_time()
for b in data:
    a = np.asarray(Image.open(io.BytesIO(b)).convert("RGB").resize((224, 224), Image.BILINEAR))
print(len(data), time.perf_counter() - t, time.process_time() - c)
`

// photo returns a 256x256 image with smooth gradients, edges and noise.
func photo(seed int) image.Image {
	img := image.NewRGBA(image.Rect(0, 0, 256, 256))
	s := uint32(seed*2654435761 + 1)
	for y := range 256 {
		for x := range 256 {
			s = s*1664525 + 1013904223
			n := float64(s>>24) / 16
			r := 128 + 100*math.Sin(float64(x)/9+float64(seed))*math.Cos(float64(y)/13) + n
			g := 128 + 90*math.Cos(float64(x+y)/17+float64(seed)/3) + n
			b := 40.0
			if (x/32+y/32+seed)%2 == 0 {
				b = 200
			}
			img.Set(x, y, color.RGBA{clamp(r), clamp(g), clamp(b + n), 255})
		}
	}
	return img
}

func clamp(v float64) uint8 { return uint8(max(0, min(255, v))) }

func main() {
	root := flag.String("root", ".", "repository root")
	prep := flag.String("prep", ".cache/bench/bin/prep", "prep binary")
	dir := flag.String("dir", ".cache/bench/images", "inputs and outputs")
	n := flag.Int("n", 1000, "images")
	runs := flag.Int("runs", 3, "runs per figure")
	out := flag.String("o", "BENCHMARKS.md", "report to update")
	section := flag.String("section", "bench/image-results.md", "file holding the section alone (\"\" for none)")
	flag.Parse()
	if err := run(*root, *prep, *dir, *n, *runs, *out, *section); err != nil {
		fmt.Fprintln(os.Stderr, "imagebench:", err)
		os.Exit(1)
	}
}

func run(root, prep, dir string, n, runs int, out, section string) error {
	src, jpgs := filepath.Join(dir, "src"), filepath.Join(dir, "jpg")
	pq := filepath.Join(src, "images.parquet")
	if _, err := os.Stat(pq); err != nil {
		if err := generate(src, jpgs, pq, n); err != nil {
			return err
		}
	}
	specPath, planPath := filepath.Join(dir, "spec.yaml"), filepath.Join(dir, "plan.json")
	if err := os.WriteFile(specPath, []byte(spec), 0o644); err != nil {
		return err
	}
	if b, err := exec.Command(prep, "plan", "--source", src, "--global-batch", "64", "--world-size", "1",
		"--shuffle", "none", "--remainder", "pad", "-o", planPath, "-q").CombinedOutput(); err != nil {
		return fmt.Errorf("prep plan: %v\n%s", err, b)
	}
	// convert returns the wall and CPU (user + system) seconds of a run.
	convert := func(jobs int) (float64, float64, int64, error) {
		o := filepath.Join(dir, "out")
		os.RemoveAll(o)
		t := time.Now()
		cmd := exec.Command(prep, "convert", "--plan", planPath, "--spec", specPath, "-o", o, "--jobs", strconv.Itoa(jobs), "-q")
		if b, err := cmd.CombinedOutput(); err != nil {
			return 0, 0, 0, fmt.Errorf("prep convert: %v\n%s", err, b)
		}
		cpu := cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()
		return time.Since(t).Seconds(), cpu.Seconds(), treeBytes(o), nil
	}
	var j1, j2, c1, c2, pil, cpil []float64
	var shardBytes int64
	for range runs {
		w, c, sz, err := convert(1)
		if err != nil {
			return err
		}
		j1, c1, shardBytes = append(j1, w), append(c1, c), sz
		if w, c, _, err = convert(2); err != nil {
			return err
		}
		j2, c2 = append(j2, w), append(c2, c)
		b, err := exec.Command("/usr/bin/python3", "-c", pilScript, jpgs).Output()
		if err != nil {
			return fmt.Errorf("pillow: %v", err)
		}
		f := strings.Fields(string(b))
		wall, _ := strconv.ParseFloat(f[1], 64)
		cpu, _ := strconv.ParseFloat(f[2], 64)
		pil, cpil = append(pil, wall), append(cpil, cpu)
	}
	pver, _ := exec.Command("/usr/bin/python3", "-c", "import PIL; print(PIL.__version__)").Output()
	srcBytes := treeBytes(src)
	m1, m2, mp := median(j1), median(j2), median(pil)
	k1, k2, kp := median(c1), median(c2), median(cpil)
	load, _ := os.ReadFile("/proc/loadavg")
	var b strings.Builder
	fmt.Fprintf(&b, "## Images (`bench/cmd/imagebench`)\n\n")
	fmt.Fprintf(&b, "%d JPEGs of 256x256 (quality 90, 4:2:0, %.1f KB each on average) in one Parquet binary column, converted to `U8 [224, 224, 3]` (`image: {size: [224, 224], resize: shorter-side, filter: bilinear}`, plus the I64 id); %d runs, medians; %d CPUs (%s/%s). Command: `.cache/bench/bin/imagebench -root . -n %d -runs %d` (run by `make bench`).\n\n",
		n, float64(srcBytes)/float64(n)/1000, runs, runtime.NumCPU(), runtime.GOOS, runtime.GOARCH, n, runs)
	b.WriteString("| what | wall s | images/s (wall) | CPU s | images per CPU second (per core) | vs Pillow per core |\n|---|---:|---:|---:|---:|---:|\n")
	fmt.Fprintf(&b, "| prep convert --jobs 1 (whole run) | %.2f | %.0f | %.2f | %.0f | %.2fx |\n", m1, float64(n)/m1, k1, float64(n)/k1, kp/k1)
	fmt.Fprintf(&b, "| prep convert --jobs 2 (whole run) | %.2f | %.0f | %.2f | %.0f | %.2fx |\n", m2, float64(n)/m2, k2, float64(n)/k2, kp/k2)
	fmt.Fprintf(&b, "| Pillow %s decode + resize, one process (decode and resize only) | %.2f | %.0f | %.2f | %.0f | 1.00x |\n\n", strings.TrimSpace(string(pver)), mp, float64(n)/mp, kp, float64(n)/kp)
	fmt.Fprintf(&b, "Per core is images over the process's CPU time (user + system), measured for prep and Pillow in the same run under the same load; contention on a busy machine inflates CPU time too, but far less than wall time (load average at the end of the run: %s).\n\n", strings.Join(strings.Fields(string(load))[:3], " "))
	fmt.Fprintf(&b, "Disk: the shard set takes %d bytes (%.1f KB per image, %.2fx the source Parquet's %d bytes): decoded pixels are stored as they will be read, one DMA per batch, where the source stores compressed JPEGs.\n\n",
		shardBytes, float64(shardBytes)/float64(n)/1000, float64(shardBytes)/float64(srcBytes), srcBytes)
	b.WriteString("\"vs Pillow per core\" is images per CPU second over Pillow's in the same run. Pillow's figure excludes reading the bytes (they are in memory before its clock starts) and writing anything; prep's includes its whole run.\n")
	b.WriteString("\nWhere prep's time goes (`go test ./convert -bench ImageJPEG224 -cpuprofile`, one 256x256 JPEG to 224x224): resampling about 40 %, Go's image/jpeg (pure Go, no SIMD) about 35 %, chroma upsampling and colour conversion about 20 %; Pillow runs libjpeg-turbo and its resampler with SIMD. A decoder behind cgo (libjpeg-turbo) and a vectorised resampler are the ways to close the gap; both must keep SPEC.md §2.8's pixels.\n")
	if section != "" {
		if err := os.WriteFile(filepath.Join(root, section), []byte(b.String()), 0o644); err != nil {
			return err
		}
	}
	fmt.Print(b.String())
	return writeSection(filepath.Join(root, out), b.String())
}

// generate writes n JPEGs into jpgs and the same bytes as a Parquet file.
func generate(src, jpgs, pq string, n int) error {
	for _, d := range []string{src, jpgs} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return err
		}
	}
	var rows []row
	for i := range n {
		var buf bytes.Buffer
		if err := jpeg.Encode(&buf, photo(i), &jpeg.Options{Quality: 90}); err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(jpgs, fmt.Sprintf("%05d.jpg", i)), buf.Bytes(), 0o644); err != nil {
			return err
		}
		rows = append(rows, row{ID: int64(i), Image: buf.Bytes()})
	}
	f, err := os.Create(pq)
	if err != nil {
		return err
	}
	w := parquet.NewGenericWriter[row](f, parquet.MaxRowsPerRowGroup(256))
	if _, err := w.Write(rows); err != nil {
		return err
	}
	if err := w.Close(); err != nil {
		return err
	}
	return f.Close()
}

func treeBytes(dir string) int64 {
	var n int64
	filepath.Walk(dir, func(_ string, fi os.FileInfo, err error) error {
		if err == nil && fi.Mode().IsRegular() {
			n += fi.Size()
		}
		return nil
	})
	return n
}

func median(v []float64) float64 {
	s := slices.Clone(v)
	slices.Sort(s)
	return s[len(s)/2]
}

const beginMark, endMark = "<!-- imagebench:begin -->", "<!-- imagebench:end -->"

// writeSection replaces the text between the markers in path, or appends
// the section with its markers.
func writeSection(path, body string) error {
	old, err := os.ReadFile(path)
	if err != nil && !os.IsNotExist(err) {
		return err
	}
	sec := beginMark + "\n" + body + endMark + "\n"
	s := string(old)
	if i, j := strings.Index(s, beginMark), strings.Index(s, endMark); i >= 0 && j > i {
		s = s[:i] + sec + s[j+len(endMark):]
	} else {
		if s != "" && !strings.HasSuffix(s, "\n\n") {
			s += "\n"
		}
		s += sec
	}
	return os.WriteFile(path, []byte(s), 0o644)
}
