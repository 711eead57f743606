package chartsource

import (
	"fmt"
	"os"
	"testing"

	"go.uber.org/goleak"

	"github.com/autox-dev/autox/internal/testenv"
)

// testCA signs the chart servers' certificates of these tests.
var testCA *testenv.CA

func TestMain(m *testing.M) {
	// The chart servers' CA is trusted the way users mount one: SSL_CERT_FILE,
	// set before anything reads the system trust store.
	caDir, err := os.MkdirTemp("", "autox-ca-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	if testCA, err = testenv.NewCA(caDir); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	os.Setenv("SSL_CERT_FILE", testCA.File)
	goleak.VerifyTestMain(m, append(ociRegistryGoroutines, goleak.Cleanup(func(code int) {
		os.RemoveAll(caDir)
		os.Exit(code)
	}))...)
}

// ociRegistryGoroutines are started by distribution's registry (the OCI chart
// server, testenv.NewOCIRegistry) when it is built and are stopped by nothing,
// not even Registry.Shutdown: the notification broadcaster (App never closes
// it), the upload purger (an endless sleep-and-purge loop; its top frame is
// time.Sleep, hence AnyFunction) and the OpenTelemetry batch span processor of
// the tracer provider that tracing.InitOpenTelemetry installs globally and
// never shuts down.
var ociRegistryGoroutines = []goleak.Option{
	goleak.IgnoreTopFunction("github.com/docker/go-events.(*Broadcaster).run"),
	goleak.IgnoreAnyFunction("github.com/distribution/distribution/v3/registry/handlers.startUploadPurger.func1"),
	goleak.IgnoreTopFunction("go.opentelemetry.io/otel/sdk/trace.(*batchSpanProcessor).processQueue"),
}
