// Package examples holds deployment examples for prep (cron, Slurm,
// Kubernetes) and a test that keeps them syntactically valid. It has no
// code of its own.
package examples
