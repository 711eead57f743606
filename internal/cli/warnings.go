package cli

import (
	"context"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"
	"k8s.io/client-go/rest"
)

// apiWarnings counts the warnings the API server sent with its answers,
// served as autox_kube_api_warnings_total.
var apiWarnings = prometheus.NewCounter(prometheus.CounterOpts{
	Name: "autox_kube_api_warnings_total",
	Help: "Warnings the Kubernetes API server sent with its answers to autox's requests, Helm's included (deprecations, admission webhooks, ValidatingAdmissionPolicies in Warn mode); their text is never logged.",
})

// warningHandler takes the `Warning:` headers of every client autox builds,
// in place of client-go's, which logs their text. That text is the API
// server's deprecation notes but also whatever an admission webhook or a
// ValidatingAdmissionPolicy in Warn mode says, and those messages often
// quote field values, a Secret's among them. The handler cannot redact them
// like errors: it does not learn which request, so which release's values,
// a warning is about (Helm's requests carry no context of autox's). So it
// drops the text, counts the warning and logs that one came.
type warningHandler struct{ log zerolog.Logger }

var (
	_ rest.WarningHandler            = warningHandler{}
	_ rest.WarningHandlerWithContext = warningHandler{}
)

func (h warningHandler) HandleWarningHeader(code int, _, _ string) { h.warned(code) }

func (h warningHandler) HandleWarningHeaderWithContext(_ context.Context, code int, _, _ string) {
	h.warned(code)
}

// warned counts and logs one warning. The agent is left out with the text:
// it is free text too when a proxy sets it.
func (h warningHandler) warned(code int) {
	apiWarnings.Inc()
	h.log.Warn().Int("code", code).Msg("the API server sent a warning; its text is not shown because it may quote values " +
		"(a Secret's too); docs/troubleshooting.md says how to read it")
}

// handleWarnings sets h on cfg, which every client of a command is built from
// (rest.CopyConfig keeps it: the leadership term's config, Helm's clients and
// their discovery), and as the process default, for any client built from
// another config.
func handleWarnings(cfg *rest.Config, log zerolog.Logger) {
	h := warningHandler{log: log.With().Str("component", "client-go").Logger()}
	cfg.WarningHandler, cfg.WarningHandlerWithContext = h, h
	rest.SetDefaultWarningHandlerWithContext(h)
}
