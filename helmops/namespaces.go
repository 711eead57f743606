package helmops

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
)

// NamespacesError names the namespaces whose release records could not be
// read; results of the other namespaces were returned.
//
// One namespace autox may not read (RBAC removed, an API error) must not hide
// the releases of the others, so readers return what they could read with
// this error. A caller that treats any error as "change nothing" stays safe;
// one that acts on the partial results must leave the failed namespaces alone
// (FailedNamespaces), never read their absence as "no releases there".
type NamespacesError struct {
	Failed map[string]error // namespace -> cause
}

// Error lists the failed namespaces in sorted order, so that the same failure
// gives the same message (logs and Events de-duplicate on it).
func (e *NamespacesError) Error() string {
	names := e.namespaces()
	causes := make([]string, len(names))
	for i, ns := range names {
		causes[i] = ns + ": " + e.Failed[ns].Error()
	}
	return fmt.Sprintf("cannot read release records in namespace(s) %s: %s", strings.Join(names, ", "), strings.Join(causes, "; "))
}

// Unwrap returns the causes in the order of Error, for errors.Is and errors.As.
func (e *NamespacesError) Unwrap() []error {
	names := e.namespaces()
	out := make([]error, len(names))
	for i, ns := range names {
		out[i] = e.Failed[ns]
	}
	return out
}

func (e *NamespacesError) namespaces() []string {
	names := make([]string, 0, len(e.Failed))
	for ns := range e.Failed {
		names = append(names, ns)
	}
	sort.Strings(names)
	return names
}

// FailedNamespaces returns the namespaces named by a *NamespacesError inside
// err (errors.As), or nil if there is none.
func FailedNamespaces(err error) map[string]bool {
	var ne *NamespacesError
	if !errors.As(err, &ne) || len(ne.Failed) == 0 {
		return nil
	}
	out := make(map[string]bool, len(ne.Failed))
	for ns := range ne.Failed {
		out[ns] = true
	}
	return out
}

// eachNamespace reads every namespace once, in the given order, and returns
// what the readable ones gave with a *NamespacesError for the others. A
// context error aborts at once and is returned alone: the caller is stopping,
// and a namespace cut off by it has not failed.
func eachNamespace[T any](ctx context.Context, namespaces []string, read func(namespace string) ([]T, error)) ([]T, error) {
	var out []T
	failed := map[string]error{}
	seen := map[string]bool{}
	for _, ns := range namespaces {
		if seen[ns] {
			continue
		}
		seen[ns] = true
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		items, err := read(ns)
		if err != nil {
			if ctxErr := ctx.Err(); ctxErr != nil {
				return nil, ctxErr
			}
			failed[ns] = err
			continue
		}
		out = append(out, items...)
	}
	if len(failed) > 0 {
		return out, &NamespacesError{Failed: failed}
	}
	return out, nil
}
