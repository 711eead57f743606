package main

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	chartcommon "helm.sh/helm/v4/pkg/chart/common"
	commonutil "helm.sh/helm/v4/pkg/chart/common/util"
	chart "helm.sh/helm/v4/pkg/chart/v2"
	"helm.sh/helm/v4/pkg/chart/v2/loader"
	"helm.sh/helm/v4/pkg/engine"
	"helm.sh/helm/v4/pkg/release/common"
	release "helm.sh/helm/v4/pkg/release/v1"
	releaseutil "helm.sh/helm/v4/pkg/release/v1/util"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"
	"sigs.k8s.io/yaml"

	"github.com/autox-dev/autox/config"
	"github.com/autox-dev/autox/internal/format"
	"github.com/autox-dev/autox/triggers/plan"
)

// The floor is the least an installer of these releases must write: per
// release, the Helm release record created pending-install, every object of
// the chart created, the record updated to deployed — what a Helm install
// writes, in the same order, and nothing else: no read, no Helm, no
// client-side rate limit. Everything sent is prepared before the clock
// starts (rendered manifests, encoded records), so the time is the API
// server's and etcd's alone, with `workers` releases in flight.

type floorRelease struct {
	pending, deployed *corev1.Secret
	objects           []floorObject
}

type floorObject struct {
	gvr schema.GroupVersionResource
	obj *unstructured.Unstructured
}

// floorResult is what the floor run measured.
type floorResult struct {
	took   time.Duration
	writes int64
}

// floorPlan is one release the floor installs.
type floorPlan struct {
	name   string
	values map[string]interface{}
	labels map[string]string // release labels, as Helm's Install.Labels
}

// floorPlans are n releases named and valued as autox's releases of the
// bench config, without autox's labels.
func floorPlans(n int) []floorPlan {
	plans := make([]floorPlan, n)
	for i := range plans {
		plans[i] = floorPlan{name: fmt.Sprintf("f%04d-r%d", i/releasesPerTrigger, i%releasesPerTrigger), values: map[string]interface{}{
			"index": i, "autox": map[string]interface{}{"trigger": map[string]interface{}{
				"group": "apps", "version": "v1", "resource": "deployments", "name": fmt.Sprintf("t%04d", i/releasesPerTrigger),
				"namespace": "bench", "labels": map[string]interface{}{"app.kubernetes.io/version": "1.0.0"}}}}}
	}
	return plans
}

// runFloor installs the planned releases of chartDir in namespace ns the
// floor's way. started, when not nil, is called as the clock starts, after
// the releases are prepared (at 10,000 triggers that takes a minute).
func runFloor(ctx context.Context, base *rest.Config, ns, chartDir string, plans []floorPlan, workers int, started func()) (floorResult, error) {
	cfg := rest.CopyConfig(base)
	cfg.QPS, cfg.Burst = -1, 0 // no client-side rate limit
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return floorResult{}, err
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return floorResult{}, err
	}
	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return floorResult{}, err
	}
	mapper := restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(dc))
	ch, err := loader.Load(chartDir)
	if err != nil {
		return floorResult{}, err
	}
	n := len(plans)
	rels := make([]floorRelease, n)
	for i := range rels {
		if rels[i], err = prepareFloorRelease(ch, ns, plans[i], mapper); err != nil {
			return floorResult{}, err
		}
	}

	var (
		next, writes atomic.Int64
		wg           sync.WaitGroup
		errMu        sync.Mutex
		firstErr     error
	)
	if started != nil {
		started()
	}
	start := time.Now()
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1)) - 1
				if i >= n || ctx.Err() != nil {
					return
				}
				if err := installFloorRelease(ctx, cs, dyn, ns, rels[i], &writes); err != nil {
					errMu.Lock()
					if firstErr == nil {
						firstErr = err
					}
					errMu.Unlock()
					return
				}
			}
		}()
	}
	wg.Wait()
	if firstErr != nil {
		return floorResult{}, firstErr
	}
	return floorResult{took: time.Since(start), writes: writes.Load()}, ctx.Err()
}

func installFloorRelease(ctx context.Context, cs kubernetes.Interface, dyn dynamic.Interface, ns string, r floorRelease, writes *atomic.Int64) error {
	secrets := cs.CoreV1().Secrets(ns)
	created, err := secrets.Create(ctx, r.pending, metav1.CreateOptions{})
	if err != nil {
		return fmt.Errorf("floor: create release record: %w", err)
	}
	writes.Add(1)
	for _, o := range r.objects {
		if _, err := dyn.Resource(o.gvr).Namespace(ns).Create(ctx, o.obj, metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("floor: create %s %s: %w", o.gvr.Resource, o.obj.GetName(), err)
		}
		writes.Add(1)
	}
	r.deployed.ResourceVersion = created.ResourceVersion
	if _, err := secrets.Update(ctx, r.deployed, metav1.UpdateOptions{}); err != nil {
		return fmt.Errorf("floor: update release record: %w", err)
	}
	writes.Add(1)
	return nil
}

// prepareFloorRelease renders the chart for one release and encodes its
// records the way Helm's secret driver does (JSON, gzip, base64).
func prepareFloorRelease(ch *chart.Chart, ns string, plan floorPlan, mapper *restmapper.DeferredDiscoveryRESTMapper) (floorRelease, error) {
	name, vals := plan.name, plan.values
	opts := chartcommon.ReleaseOptions{Name: name, Namespace: ns, Revision: 1, IsInstall: true}
	toRender, err := commonutil.ToRenderValues(ch, vals, opts, chartcommon.DefaultCapabilities)
	if err != nil {
		return floorRelease{}, err
	}
	files, err := engine.Render(ch, toRender)
	if err != nil {
		return floorRelease{}, err
	}
	var manifest strings.Builder
	var out floorRelease
	for path, content := range files {
		if strings.HasSuffix(path, "NOTES.txt") || strings.TrimSpace(content) == "" {
			continue
		}
		for _, doc := range releaseutil.SplitManifests(content) {
			obj := &unstructured.Unstructured{}
			if err := yaml.Unmarshal([]byte(doc), &obj.Object); err != nil {
				return floorRelease{}, fmt.Errorf("%s: %w", path, err)
			}
			if len(obj.Object) == 0 {
				continue
			}
			gvk := obj.GroupVersionKind()
			m, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
			if err != nil {
				return floorRelease{}, err
			}
			obj.SetNamespace(ns)
			obj.SetLabels(merge(obj.GetLabels(), map[string]string{"app.kubernetes.io/managed-by": "Helm"}))
			obj.SetAnnotations(merge(obj.GetAnnotations(), map[string]string{"meta.helm.sh/release-name": name, "meta.helm.sh/release-namespace": ns}))
			out.objects = append(out.objects, floorObject{gvr: m.Resource, obj: obj})
			fmt.Fprintf(&manifest, "---\n# Source: %s\n%s\n", path, doc)
		}
	}
	now := time.Now()
	rel := &release.Release{Name: name, Namespace: ns, Version: 1, Chart: ch, Config: vals, Manifest: manifest.String(), Labels: plan.labels,
		Info: &release.Info{FirstDeployed: now, LastDeployed: now, Status: common.StatusPendingInstall, Description: "Initial install underway"}}
	if out.pending, err = releaseSecret(rel); err != nil {
		return floorRelease{}, err
	}
	rel.Info.Status, rel.Info.Description = common.StatusDeployed, "Install complete"
	if out.deployed, err = releaseSecret(rel); err != nil {
		return floorRelease{}, err
	}
	return out, nil
}

func releaseSecret(rel *release.Release) (*corev1.Secret, error) {
	data, err := json.Marshal(rel)
	if err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	w, err := gzip.NewWriterLevel(&buf, gzip.BestCompression)
	if err != nil {
		return nil, err
	}
	if _, err := w.Write(data); err != nil {
		return nil, err
	}
	if err := w.Close(); err != nil {
		return nil, err
	}
	return &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{
			Name: fmt.Sprintf("sh.helm.release.v1.%s.v%d", rel.Name, rel.Version),
			Labels: merge(rel.Labels, map[string]string{"name": rel.Name, "owner": "helm", "status": rel.Info.Status.String(),
				"version": strconv.Itoa(rel.Version)}),
		},
		Type: "helm.sh/release.v1",
		Data: map[string][]byte{"release": []byte(base64.StdEncoding.EncodeToString(buf.Bytes()))},
	}, nil
}

func merge(a, b map[string]string) map[string]string {
	out := map[string]string{}
	for k, v := range a {
		out[k] = v
	}
	for k, v := range b {
		out[k] = v
	}
	return out
}

// seedPlans are the releases autox would install for cfg, with the labels it
// would write (spec, release spec, instance, digest, revision 1), so that
// autox finds them in sync: a fleet too big to converge within a run starts
// converged.
func seedPlans(cfg *config.Config, labels map[string]string) ([]floorPlan, error) {
	var plans []floorPlan
	for _, name := range cfg.SpecNames() {
		spec := cfg.Specs[name]
		for _, id := range spec.ReleaseSpecIDs() {
			rs := spec.ReleaseSpecs[id]
			ch, err := loader.Load(rs.Chart.Path)
			if err != nil {
				return nil, err
			}
			values := plan.DesiredValues(rs, spec.Trigger, labels)
			digest, err := format.Digest(ch.Metadata.Name, ch.Metadata.Version, values)
			if err != nil {
				return nil, err
			}
			plans = append(plans, floorPlan{name: rs.ReleaseName, values: values, labels: format.ReleaseLabels(
				format.Owner{Spec: name, ReleaseSpec: id, Instance: format.DefaultInstance}, digest, 1)})
		}
	}
	return plans, nil
}
