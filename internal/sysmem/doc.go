// Package sysmem holds the operating-system calls behind data staged
// between the stages of a conversion: private anonymous memory outside
// the Go heap, aligned to and advised for transparent huge pages
// (MapAnon), and files whose every block is reserved before the first
// write (Reserve), so that a full disk fails a run at its start rather
// than midway. Package feature (the values arena, held samples) and
// package convert (staging, spill) both use it. MakeHuge asks for huge
// pages under large buffers of the Go heap (pqread's decoded windows,
// plan's tables), where first touches of fresh memory would otherwise
// fault 4 KiB at a time.
package sysmem
