//go:build !unix

package shardfmt

import "os"

func mmapFile(f *os.File, size int64) ([]byte, error) { return nil, errNoMmap }

func munmap(b []byte) error { return nil }

func dontNeed(b []byte) error { return nil }
