package format

// FieldManager is the field manager of every write autox makes on a
// release's objects — Helm's, through kube.ManagedFieldsManager, and a
// drift correction's — and of its drift checks' dry runs. Helm would
// otherwise name it after the binary (filepath.Base(os.Args[0])), which is
// "autox" for the image's /autox: fixing it keeps the name whatever the
// binary is called. It is part of the format: a release's managedFields
// say which fields autox wrote, and a drift check reads them so.
const FieldManager = "autox"

// AnnotationDrift, set to DriftDisabled on an object in a chart or on the
// live object, opts that object out of drift correction: its drift is
// reported, never corrected.
const (
	AnnotationDrift = "autox.dev/drift"
	DriftDisabled   = "disabled"
)

// DriftOptedOut reports whether an object with these annotations opts
// out of drift correction.
func DriftOptedOut(annotations map[string]string) bool {
	return annotations[AnnotationDrift] == DriftDisabled
}
