package gpuload

import (
	"fmt"
	"time"

	"github.com/prepml/prep/gpuload/internal/cuda"
	"github.com/prepml/prep/shardfmt"
)

// gdsFile is the shard registered with cuFile for GPUDirect Storage reads.
type gdsFile struct {
	handle cuda.FileHandle
	driver bool // cuFileDriverOpen succeeded (closed by close)
	reg    bool // handle is registered
}

// openGDS loads libcufile, opens its driver, opens the shard with O_DIRECT,
// registers it and reads block 0 into device buffer 0 (so a refusal shows at
// Open). Errors wrap ErrGDSUnavailable, or are the O_DIRECT refusal.
func (c *cudaBackend) openGDS() error {
	if err := cuda.LoadCuFile(); err != nil {
		c.stats.GDS = err.Error()
		return err
	}
	c.stats.GDS = "loaded"
	f, offAlign, _, err := openDirect(shardFile(c.l.sh), c.l.path)
	if err != nil {
		return err
	}
	fd, ok := f.(interface{ Fd() uintptr })
	if !ok {
		f.Close()
		return fmt.Errorf("%w: the shard's O_DIRECT file has no descriptor", ErrGDSUnavailable)
	}
	g := &gdsFile{}
	err = c.ctx.Do(func(cur *cuda.Current) error {
		if err := cur.FileDriverOpen(); err != nil {
			return err
		}
		g.driver = true
		h, err := cur.FileHandleRegister(int(fd.Fd()))
		if err != nil {
			return err
		}
		g.handle, g.reg = h, true
		if c.l.steps == 0 {
			return nil
		}
		info, err := c.l.sh.Batch(0)
		if err != nil {
			return err
		}
		if _, err := c.gdsRead(cur, g, 0, int64(info.Offset)); err != nil {
			return fmt.Errorf("%w: reading block 0: %w", ErrGDSUnavailable, err)
		}
		return nil
	})
	if err != nil {
		c.ctx.Do(func(cur *cuda.Current) error { return g.close(cur) })
		f.Close()
		return err
	}
	c.gds, c.direct = g, f
	c.stats.DirectAlign = offAlign
	return nil
}

// close deregisters the file and closes the cuFile driver.
func (g *gdsFile) close(cur *cuda.Current) error {
	if g.reg {
		cur.FileHandleDeregister(g.handle)
		g.reg = false
	}
	if g.driver {
		g.driver = false
		return cur.FileDriverClose()
	}
	return nil
}

// gdsRead reads the block at file offset off into device buffer dev; a
// short read (the shard cut short) wraps shardfmt.ErrSize.
func (c *cudaBackend) gdsRead(cur *cuda.Current, g *gdsFile, dev int, off int64) (int, error) {
	n, err := cur.FileRead(g.handle, c.devBufs[dev], c.size, off)
	if err == nil && uint64(n) != c.size {
		err = fmt.Errorf("%w: read %d of %d bytes at offset %d", shardfmt.ErrSize, n, c.size, off)
	}
	return n, err
}

// readGDS reads steps [step, NumBatches) with cuFileRead straight into free
// device buffers, in order, and delivers each when its read returns (the
// bytes are then on the device). It runs with the context bound to its
// thread.
func (c *cudaBackend) readGDS(r *cudaRun, step int) {
	defer r.wg.Done()
	cur, unbind, err := c.ctx.Bind()
	if err != nil {
		c.deliverOrDrop(r, delivery{step: step, slot: -1, err: c.l.blockError("binding the CUDA context", step, err)})
		return
	}
	defer unbind()
	for s := step; s < c.l.steps; s++ {
		var dev int
		select {
		case dev = <-c.devFree:
		case <-r.quit:
			return
		}
		d := delivery{step: s, slot: dev, dev: uintptr(c.devBufs[dev])}
		info, err := c.l.sh.Batch(s)
		if err == nil {
			t := time.Now()
			_, err = c.gdsRead(cur, c.gds, dev, int64(info.Offset))
			c.readNanos.Add(int64(time.Since(t)))
		}
		if err != nil {
			c.devFree <- dev
			c.deliverOrDrop(r, delivery{step: s, slot: -1, err: c.l.blockError("reading block to device", s, err)})
			return
		}
		c.batches.Add(1)
		if !c.deliverOrDrop(r, d) {
			return
		}
	}
}

// deliverOrDrop hands d to the consumer, or, when the run is stopped first,
// gives its device buffer back and reports false.
func (c *cudaBackend) deliverOrDrop(r *cudaRun, d delivery) bool {
	select {
	case r.out <- d:
		return true
	case <-r.quit:
		if d.err == nil {
			c.devFree <- d.slot
		}
		return false
	}
}
