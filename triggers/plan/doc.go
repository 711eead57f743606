// Package plan is autox's decision, and nothing else: given everything
// observed about one spec — its trigger, its releases, the releases of the
// names it wants, its charts' identities, its values sources, the time —
// Decide returns the Plan: the ordered steps that bring the spec's releases
// where the config wants them. Given what a periodic pass read, Triage
// returns the keys that need a full reconcile. It reads nothing, writes
// nothing and asks no clock: `autox run`, `autox plan` and the quiet pass
// all call the same functions, and table tests cover them without a
// cluster. Releases and records come in the vocabulary of internal/format,
// which helmops reads them into.
package plan
