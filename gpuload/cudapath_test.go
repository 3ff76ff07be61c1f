package gpuload

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"sync"
	"testing"
)

func TestChooseCUDAPaths(t *testing.T) {
	const gib = 1 << 30
	auto := []string{CUDAPathRegister, CUDAPathDirect, CUDAPathPread}
	ring := []string{CUDAPathDirect, CUDAPathPread}
	for _, c := range []struct {
		name string
		req  string
		in   pathInputs
		want pathPlan
	}{
		{"resident: register first", CUDAPathAuto, pathInputs{steps: 8, mapped: true, resident: 1, shardBytes: 4 * gib, ramBytes: 64 * gib},
			pathPlan{paths: auto, reason: "100% of the shard in page cache"}},
		{"90% resident is enough", CUDAPathAuto, pathInputs{steps: 8, mapped: true, resident: 0.9, shardBytes: 4 * gib, ramBytes: 64 * gib},
			pathPlan{paths: auto, reason: "90% of the shard in page cache"}},
		{"89.9% resident is not", CUDAPathAuto, pathInputs{steps: 8, mapped: true, resident: 0.899, shardBytes: 4 * gib, ramBytes: 64 * gib},
			pathPlan{paths: ring, reason: "89% of the shard in page cache, under 90%"}},
		{"cold", CUDAPathAuto, pathInputs{steps: 8, mapped: true, resident: 0, shardBytes: 4 * gib, ramBytes: 64 * gib},
			pathPlan{paths: ring, reason: "0% of the shard in page cache, under 90%"}},
		{"all but a page is not 100%", CUDAPathAuto, pathInputs{steps: 8, mapped: true, resident: 0.9999, shardBytes: 4 * gib},
			pathPlan{paths: auto, reason: "99% of the shard in page cache"}},
		{"resident but over half the RAM", CUDAPathAuto, pathInputs{steps: 8, mapped: true, resident: 1, shardBytes: 33 * gib, ramBytes: 64 * gib},
			pathPlan{paths: ring, reason: "100% of the shard in page cache, but its 35433480192 bytes exceed 50% of the 68719476736 bytes of RAM"}},
		{"exactly half the RAM is registered", CUDAPathAuto, pathInputs{steps: 8, mapped: true, resident: 1, shardBytes: 32 * gib, ramBytes: 64 * gib},
			pathPlan{paths: auto, reason: "100% of the shard in page cache"}},
		{"RAM unknown", CUDAPathAuto, pathInputs{steps: 8, mapped: true, resident: 1, shardBytes: 33 * gib},
			pathPlan{paths: auto, reason: "100% of the shard in page cache"}},
		{"residency unknown", CUDAPathAuto, pathInputs{steps: 8, mapped: true, resident: -1, shardBytes: gib},
			pathPlan{paths: ring, reason: "page cache residency unknown"}},
		{"not mapped", CUDAPathAuto, pathInputs{steps: 8, resident: -1, shardBytes: gib},
			pathPlan{paths: ring, reason: "shard not mapped: cannot register it"}},
		{"empty shard", CUDAPathAuto, pathInputs{mapped: true, resident: 1},
			pathPlan{paths: []string{CUDAPathPread}, reason: "empty shard: nothing to read"}},
		{"requested direct", CUDAPathDirect, pathInputs{steps: 8, mapped: true, resident: 1},
			pathPlan{paths: []string{CUDAPathDirect}, reason: "requested", explicit: true}},
		{"requested gds", CUDAPathGDS, pathInputs{steps: 8, mapped: true, resident: 0},
			pathPlan{paths: []string{CUDAPathGDS}, reason: "requested", explicit: true}},
		{"requested register, cold", CUDAPathRegister, pathInputs{steps: 8, mapped: true, resident: 0},
			pathPlan{paths: []string{CUDAPathRegister}, reason: "requested", explicit: true}},
		{"requested register, not mapped", CUDAPathRegister, pathInputs{steps: 8, resident: -1},
			pathPlan{paths: []string{CUDAPathPread}, reason: "requested register; the shard is not mapped",
				fallbacks: []Fallback{{Path: CUDAPathRegister, Error: "the shard reader could not map the file"}}, explicit: true}},
		{"requested register, empty and not mapped", CUDAPathRegister, pathInputs{resident: -1},
			pathPlan{paths: []string{CUDAPathRegister}, reason: "requested", explicit: true}},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := chooseCUDAPaths(c.req, c.in); !reflect.DeepEqual(got, c.want) {
				t.Errorf("chooseCUDAPaths(%q, %+v) =\n%+v, want\n%+v", c.req, c.in, got, c.want)
			}
		})
	}
}

func TestRequestedPath(t *testing.T) {
	for _, c := range []struct {
		opts    Options
		env     string
		want    string
		wantErr string
	}{
		{Options{}, "", CUDAPathAuto, ""},
		{Options{CUDAPath: CUDAPathAuto}, "", CUDAPathAuto, ""},
		{Options{RegisterMmap: true}, "", CUDAPathRegister, ""},
		{Options{RegisterMmap: true, CUDAPath: CUDAPathRegister}, "", CUDAPathRegister, ""},
		{Options{CUDAPath: CUDAPathDirect}, "", CUDAPathDirect, ""},
		{Options{CUDAPath: CUDAPathPread}, "", CUDAPathPread, ""},
		{Options{CUDAPath: CUDAPathGDS}, "", CUDAPathGDS, ""},
		{Options{}, "direct", CUDAPathDirect, ""},
		{Options{CUDAPath: CUDAPathPread}, "direct", CUDAPathPread, ""}, // the option wins
		{Options{RegisterMmap: true}, "pread", CUDAPathRegister, ""},
		{Options{RegisterMmap: true, CUDAPath: CUDAPathDirect}, "", "", `invalid argument: RegisterMmap with CUDAPath "direct"`},
		{Options{CUDAPath: "dma"}, "", "", `invalid argument: unknown CUDA path "dma" (want auto, register, direct, pread or gds)`},
		{Options{}, "fast", "", `invalid argument: unknown CUDA path "fast" (want auto, register, direct, pread or gds)`},
	} {
		t.Setenv(EnvCUDAPath, c.env)
		got, err := requestedPath(c.opts)
		if c.wantErr != "" {
			if !errors.Is(err, ErrInvalid) || err.Error() != c.wantErr {
				t.Errorf("requestedPath(%+v) with %s=%q = %q, %v; want error %q", c.opts, EnvCUDAPath, c.env, got, err, c.wantErr)
			}
			continue
		}
		if err != nil || got != c.want {
			t.Errorf("requestedPath(%+v) with %s=%q = %q, %v; want %q", c.opts, EnvCUDAPath, c.env, got, err, c.want)
		}
	}
}

func TestDirectAlignment(t *testing.T) {
	page := []uintptr{0x7f0000000000, 0x7f0000400000}
	for _, c := range []struct {
		name               string
		offAlign, memAlign uint32
		dataOff, block     uint64
		bufs               []uintptr
		want               string // "" for no error
	}{
		{"512-byte sectors", 512, 512, 8192, 4 << 20, page, ""},
		{"4 KiB sectors", 4096, 4096, 8192, 4 << 20, page, ""},
		{"4 KiB sectors, smallest block", 4096, 512, 4096, 4096, page, ""},
		{"8 KiB sectors: a block start at 4096 breaks", 8192, 512, 4096, 8192, page,
			"blocks start at offset 4096, not a multiple of the 8192-byte O_DIRECT alignment"},
		{"8 KiB sectors: a 12 KiB block breaks", 8192, 512, 8192, 12288, page,
			"block size 12288 is not a multiple of the 8192-byte O_DIRECT alignment"},
		{"8 KiB sectors, aligned shard", 8192, 512, 8192, 16384, page, ""},
		{"buffer misaligned", 512, 512, 4096, 4096, []uintptr{0x7f0000000000, 0x7f0000000100},
			"pinned buffer at 0x7f0000000100 is not 512-byte aligned for O_DIRECT"},
		{"zero offset alignment", 0, 512, 4096, 4096, page, "file system offset alignment 0 is not a power of two"},
		{"odd offset alignment", 3000, 512, 4096, 4096, page, "file system offset alignment 3000 is not a power of two"},
		{"odd memory alignment", 512, 48, 4096, 4096, page, "file system memory alignment 48 is not a power of two"},
	} {
		t.Run(c.name, func(t *testing.T) {
			err := directAlignment(c.offAlign, c.memAlign, c.dataOff, c.block, c.bufs)
			got := ""
			if err != nil {
				got = err.Error()
			}
			if got != c.want {
				t.Errorf("directAlignment = %q, want %q", got, c.want)
			}
		})
	}
}

var (
	directOnce sync.Once
	directWhy  string
)

// noDirect returns why the file system of the tests' temporary directories
// refuses O_DIRECT reads (tmpfs before Linux 6.6, some overlayfs and FUSE
// mounts, other systems than Linux), or "" when it accepts them.
func noDirect() string {
	directOnce.Do(func() {
		dir, err := os.MkdirTemp("", "gpuload-direct")
		if err != nil {
			directWhy = err.Error()
			return
		}
		defer os.RemoveAll(dir)
		p := filepath.Join(dir, "f")
		if err := os.WriteFile(p, make([]byte, 8192), 0o644); err != nil {
			directWhy = err.Error()
			return
		}
		plain, err := os.Open(p)
		if err != nil {
			directWhy = err.Error()
			return
		}
		defer plain.Close()
		f, _, _, err := openDirect(plain, p)
		if err != nil {
			directWhy = err.Error()
			return
		}
		defer f.Close()
		buf, err := allocBuffer(4096)
		if err != nil {
			directWhy = err.Error()
			return
		}
		defer freeBuffer(buf)
		if _, err := f.ReadAt(buf, 4096); err != nil {
			directWhy = "O_DIRECT read: " + err.Error()
		}
	})
	return directWhy
}

// usable reports whether a test may open a loader with opts here: false
// for the direct path where the file system refuses O_DIRECT (the
// fallbacks are tested with a stand-in that refuses it everywhere).
func usable(opts Options) bool {
	return opts.CUDAPath != CUDAPathDirect || noDirect() == ""
}
