//go:build !linux

package main

import "errors"

var errLinuxOnly = errors.New("page cache eviction and O_DIRECT reads are measured on Linux only")

// evict is Linux-only.
func evict(path string) error { return errLinuxOnly }

// diskRate is Linux-only.
func diskRate(path string, direct bool, qd int) (float64, error) { return 0, errLinuxOnly }
