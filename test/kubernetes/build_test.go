// Package kubernetes_test checks deploy/kubernetes without a Kubernetes
// cluster or Helm: kustomize (its Go API, the code kubectl apply -k runs)
// builds every overlay; every resource, every file of base and overlays and
// every kustomization decodes strictly (unknown fields are errors) into the
// official k8s.io/api types, or for KEDA's ScaledObject into a struct of
// the fields used; every flag a container passes to lovia is accepted, and
// every Secret, ConfigMap and port a manifest references is defined. The
// NATS chart values are compared with deploy/kubernetes/nats/nats.conf,
// which starts here as a three-node cluster; the production containers
// then run in process against it with their manifests' args, environment
// and mounts, their readiness probes answer, and the autoscaling signal
// KEDA reads counts the pending runs.
package kubernetes_test

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"sigs.k8s.io/kustomize/api/krusty"
	kustypes "sigs.k8s.io/kustomize/api/types"
	"sigs.k8s.io/kustomize/kyaml/filesys"
	sigsyaml "sigs.k8s.io/yaml"
)

// Paths relative to this package's directory (go test runs tests there).
const (
	repoRoot = "../.."
	kubeDir  = repoRoot + "/deploy/kubernetes"
)

// overlays are the kustomizations a user applies.
var overlays = []string{"dev", "production"}

// scaledObject is the part of KEDA's keda.sh/v1alpha1 ScaledObject that
// deploy/kubernetes uses (KEDA's API module is not a dependency here).
type scaledObject struct {
	APIVersion string                 `json:"apiVersion"`
	Kind       string                 `json:"kind"`
	Metadata   scaledObjectMeta       `json:"metadata"`
	Spec       scaledObjectSpec       `json:"spec"`
	Status     map[string]interface{} `json:"status,omitempty"`
}

type scaledObjectMeta struct {
	Name      string            `json:"name"`
	Namespace string            `json:"namespace,omitempty"`
	Labels    map[string]string `json:"labels,omitempty"`
}

type scaledObjectSpec struct {
	ScaleTargetRef struct {
		Name string `json:"name"`
	} `json:"scaleTargetRef"`
	MinReplicaCount *int32 `json:"minReplicaCount,omitempty"`
	MaxReplicaCount *int32 `json:"maxReplicaCount,omitempty"`
	PollingInterval *int32 `json:"pollingInterval,omitempty"`
	Advanced        *struct {
		HorizontalPodAutoscalerConfig *struct {
			Behavior *autoscalingv2.HorizontalPodAutoscalerBehavior `json:"behavior,omitempty"`
		} `json:"horizontalPodAutoscalerConfig,omitempty"`
	} `json:"advanced,omitempty"`
	Triggers []struct {
		Type     string            `json:"type"`
		Metadata map[string]string `json:"metadata"`
	} `json:"triggers"`
}

// build is one kustomization's output, decoded.
type build struct {
	dir           string
	deployments   map[string]*appsv1.Deployment
	services      map[string]*corev1.Service
	configMaps    map[string]*corev1.ConfigMap
	secrets       map[string]*corev1.Secret
	pdbs          map[string]*policyv1.PodDisruptionBudget
	scaledObjects map[string]*scaledObject
}

// kustomize builds dir as kubectl apply -k would and decodes every
// resource strictly.
func kustomize(t *testing.T, dir string) *build {
	t.Helper()
	k := krusty.MakeKustomizer(krusty.MakeDefaultOptions())
	rm, err := k.Run(filesys.MakeFsOnDisk(), dir)
	require.NoError(t, err, "kustomize build %s", dir)
	b := &build{dir: dir,
		deployments: map[string]*appsv1.Deployment{}, services: map[string]*corev1.Service{},
		configMaps: map[string]*corev1.ConfigMap{}, secrets: map[string]*corev1.Secret{},
		pdbs: map[string]*policyv1.PodDisruptionBudget{}, scaledObjects: map[string]*scaledObject{},
	}
	require.NotEmpty(t, rm.Resources(), "%s builds no resources", dir)
	for _, r := range rm.Resources() {
		y, err := r.AsYAML()
		require.NoError(t, err)
		what := fmt.Sprintf("%s: %s %s", dir, r.GetKind(), r.GetName())
		var name string
		switch gvk := r.GetApiVersion() + " " + r.GetKind(); gvk {
		case "apps/v1 Deployment":
			name = decodeInto(t, what, y, b.deployments)
		case "v1 Service":
			name = decodeInto(t, what, y, b.services)
		case "v1 ConfigMap":
			name = decodeInto(t, what, y, b.configMaps)
		case "v1 Secret":
			name = decodeInto(t, what, y, b.secrets)
		case "policy/v1 PodDisruptionBudget":
			name = decodeInto(t, what, y, b.pdbs)
		case "keda.sh/v1alpha1 ScaledObject":
			var so scaledObject
			require.NoError(t, sigsyaml.UnmarshalStrict(y, &so), "%s does not decode strictly", what)
			b.scaledObjects[so.Metadata.Name] = &so
			name = so.Metadata.Name
		default:
			t.Fatalf("%s: no decoder for %s in this test; add one", what, gvk)
		}
		require.Equal(t, r.GetName(), name, what)
	}
	return b
}

// decodeInto decodes y strictly into a new T and files it by name.
func decodeInto[T any, P interface {
	*T
	GetName() string
}](t *testing.T, what string, y []byte, into map[string]P) string {
	t.Helper()
	p := P(new(T))
	require.NoError(t, sigsyaml.UnmarshalStrict(y, p), "%s does not decode strictly", what)
	require.NotContains(t, into, p.GetName(), "%s defined twice", what)
	into[p.GetName()] = p
	return p.GetName()
}

// TestEveryFileDecodesStrictly decodes each YAML document of base and the
// overlays on its own (patches included, before any assembly): the
// kustomizations into kustomize's Kustomization, the rest by kind.
// Files a kustomization generates a ConfigMap from are data, not manifests.
func TestEveryFileDecodesStrictly(t *testing.T) {
	t.Parallel()
	dirs := []string{filepath.Join(kubeDir, "base")}
	for _, o := range overlays {
		dirs = append(dirs, filepath.Join(kubeDir, "overlays", o))
	}
	for _, dir := range dirs {
		data, err := os.ReadFile(filepath.Join(dir, "kustomization.yaml"))
		require.NoError(t, err)
		var k kustypes.Kustomization
		require.NoError(t, sigsyaml.UnmarshalStrict(data, &k), "%s/kustomization.yaml does not decode strictly", dir)
		var generated []string
		for _, g := range k.ConfigMapGenerator {
			generated = append(generated, g.FileSources...)
		}
		for _, g := range k.SecretGenerator {
			generated = append(generated, g.FileSources...)
		}
		files, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
		require.NoError(t, err)
		for _, f := range files {
			base := filepath.Base(f)
			if base == "kustomization.yaml" || slices.Contains(generated, base) {
				continue
			}
			listed := slices.Contains(k.Resources, base) || slices.ContainsFunc(k.Patches, func(p kustypes.Patch) bool { return p.Path == base })
			require.True(t, listed, "%s is neither a resource nor a patch of its kustomization", f)
			data, err := os.ReadFile(f)
			require.NoError(t, err)
			for i, doc := range bytes.Split(data, []byte("\n---\n")) {
				decodeDocument(t, fmt.Sprintf("%s, document %d", f, i+1), doc)
			}
		}
	}
}

// decodeDocument decodes one YAML document strictly by its kind.
func decodeDocument(t *testing.T, what string, doc []byte) {
	t.Helper()
	var tm struct {
		APIVersion string `json:"apiVersion"`
		Kind       string `json:"kind"`
	}
	require.NoError(t, sigsyaml.Unmarshal(doc, &tm), what)
	var into any
	switch tm.APIVersion + " " + tm.Kind {
	case "apps/v1 Deployment":
		into = &appsv1.Deployment{}
	case "v1 Service":
		into = &corev1.Service{}
	case "v1 ConfigMap":
		into = &corev1.ConfigMap{}
	case "v1 Secret":
		into = &corev1.Secret{}
	case "policy/v1 PodDisruptionBudget":
		into = &policyv1.PodDisruptionBudget{}
	case "keda.sh/v1alpha1 ScaledObject":
		into = &scaledObject{}
	default:
		t.Fatalf("%s: no decoder for %q %q in this test; add one", what, tm.APIVersion, tm.Kind)
	}
	require.NoError(t, sigsyaml.UnmarshalStrict(doc, into), "%s does not decode strictly", what)
}

// A field the API does not know is an error, not silently dropped: the
// decoding above would catch a typo.
func TestStrictDecodingRejectsUnknownFields(t *testing.T) {
	t.Parallel()
	var d appsv1.Deployment
	err := sigsyaml.UnmarshalStrict([]byte("apiVersion: apps/v1\nkind: Deployment\nspec:\n  template:\n    spec:\n      terminationGracePeriod: 45\n"), &d)
	require.ErrorContains(t, err, "terminationGracePeriod")
	var so scaledObject
	err = sigsyaml.UnmarshalStrict([]byte("apiVersion: keda.sh/v1alpha1\nkind: ScaledObject\nspec:\n  maxReplicas: 3\n"), &so)
	require.ErrorContains(t, err, "maxReplicas")
}

// container returns a Deployment's one container.
func container(t *testing.T, d *appsv1.Deployment) corev1.Container {
	t.Helper()
	require.Len(t, d.Spec.Template.Spec.Containers, 1, "deployment %s: containers", d.Name)
	return d.Spec.Template.Spec.Containers[0]
}

// flagValue returns the value of --name in args, or "".
func flagValue(args []string, name string) string {
	for i, a := range args {
		if a == "--"+name && i+1 < len(args) {
			return args[i+1]
		}
		if v, ok := strings.CutPrefix(a, "--"+name+"="); ok {
			return v
		}
	}
	return ""
}
