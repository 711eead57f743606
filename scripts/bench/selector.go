package main

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/autox-dev/autox/internal/testenv"
)

// selectorYAML is the config of the selector run (issue 13): one selector
// spec serving n matching Deployments with one release each.
func selectorYAML(n int, chart, drift string) string {
	return fmt.Sprintf(`namespaces: [bench]
specs:
  sel:
    trigger:
      group: apps
      version: v1
      resource: deployments
      selector: {matchLabels: {bench.autox/selected: "on"}}
      maxObjects: %d
%s    releaseSpecs:
      job: {chart: {path: %s}}
`, n, driftLine(drift), chart)
}

// createSelected creates n Deployments the selector matches and half as
// many again that it does not: an informer watching with the selector must
// not pay for them.
func createSelected(ctx context.Context, cs kubernetes.Interface, n int) error {
	if err := createLabelled(ctx, cs, "s", n, map[string]string{"bench.autox/selected": "on", "app.kubernetes.io/version": "1.0.0"}); err != nil {
		return err
	}
	return createLabelled(ctx, cs, "u", n/2, map[string]string{"app.kubernetes.io/version": "1.0.0"})
}

// createLabelled creates n Deployments prefix0000… with these labels, 16 at a time.
func createLabelled(ctx context.Context, cs kubernetes.Interface, prefix string, n int, labels map[string]string) error {
	var (
		wg   sync.WaitGroup
		next atomic.Int64
		errs = make([]error, 16)
	)
	for w := range errs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := int(next.Add(1)) - 1; i < n && errs[w] == nil; i = int(next.Add(1)) - 1 {
				d := testenv.DeploymentObject("bench", fmt.Sprintf("%s%04d", prefix, i), labels)
				_, errs[w] = cs.AppsV1().Deployments("bench").Create(ctx, d, metav1.CreateOptions{})
			}
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}
