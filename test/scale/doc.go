// Package scale is the scale benchmark (make bench-scale): many live runs
// on real `lovia worker` processes against a real nats-server process, the
// time until they all run and the workers' memory, then a mass failover —
// the worker holding them killed with SIGKILL — timed until every run has
// resumed on the survivors. Its tests carry the build tag scale, so the
// other test commands do not run them; see scripts/bench-scale.sh.
package scale
