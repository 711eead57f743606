package helmops

import (
	"helm.sh/helm/v4/pkg/kube"

	"github.com/autox-dev/autox/internal/format"
)

// Helm names the field manager of its writes after the binary unless
// kube.ManagedFieldsManager is set (Helm 3 and 4 alike). autox's image runs
// /autox, so its releases' fields have always been managed by "autox";
// setting the name keeps it so whatever the binary is called (a test
// binary, a renamed build), which drift checks rely on to tell autox's
// writes from others'. It changes nothing for releases written so far by
// the image: the same name. A build that ran under another name leaves
// managedFields entries under that name; client-side writes (autox's
// default) never conflict over them, and server-side ones force conflicts.
// Releases the Helm CLI wrote keep their "helm" entries: nothing here
// writes them.
func init() { kube.ManagedFieldsManager = format.FieldManager }
