/*
Copyright 2025 The Kubernetes Authors.

Licensed under the Apache License, Version 2.0 (the "License");
you may not use this file except in compliance with the License.
You may obtain a copy of the License at

    http://www.apache.org/licenses/LICENSE-2.0

Unless required by applicable law or agreed to in writing, software
distributed under the License is distributed on an "AS IS" BASIS,
WITHOUT WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied.
See the License for the specific language governing permissions and
limitations under the License.
*/

package revisions_test

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/yaml"

	v10 "github.com/inferencepool-conformance/api/revisions/v1_0/v1"
	v102 "github.com/inferencepool-conformance/api/revisions/v1_0_2/v1"
	v11 "github.com/inferencepool-conformance/api/revisions/v1_1/v1"
	v14 "github.com/inferencepool-conformance/api/revisions/v1_4/v1"
	v16 "github.com/inferencepool-conformance/api/revisions/v1_6/v1"
	"github.com/inferencepool-conformance/api/revisions/v1common"
)

// v1Revision is what SPEC section 8 says about the CRD of one revision of
// inference.networking.k8s.io/v1. The tests below read the generated CRD and
// compare it with these facts, so a missing or wrong marker fails here.
type v1Revision struct {
	name          string // directory under manifests/crd/revisions
	bundleVersion string // the oldest release of the revision
	boundedLabels bool   // selector.matchLabels has minProperties 1, maxProperties 64 (v1.0.2 on)
	maxPorts      int64  // targetPorts maxItems
	uniquePorts   bool   // targetPorts carries the uniqueness rule (v1.1 on)
	appProtocol   bool   // spec.appProtocol exists (v1.4 on)
	eppRequired   bool   // spec.endpointPickerRef is required (before v1.6)
	controllerNm  bool   // status.parents[].controllerName exists (v1.1 on)
	addToScheme   func(*runtime.Scheme) error
}

var v1Revisions = []v1Revision{
	{name: "v1.0", bundleVersion: "v1.0.0", maxPorts: 1, eppRequired: true, addToScheme: v10.AddToScheme},
	{name: "v1.0.2", bundleVersion: "v1.0.2", boundedLabels: true, maxPorts: 1, eppRequired: true, addToScheme: v102.AddToScheme},
	{name: "v1.1", bundleVersion: "v1.1.0", boundedLabels: true, maxPorts: 8, uniquePorts: true, eppRequired: true,
		controllerNm: true, addToScheme: v11.AddToScheme},
	{name: "v1.4", bundleVersion: "v1.4.0", boundedLabels: true, maxPorts: 8, uniquePorts: true, appProtocol: true,
		eppRequired: true, controllerNm: true, addToScheme: v14.AddToScheme},
	{name: "v1.6", bundleVersion: "v1.6.0", boundedLabels: true, maxPorts: 8, uniquePorts: true, appProtocol: true,
		controllerNm: true, addToScheme: v16.AddToScheme},
}

const (
	v1Group          = "inference.networking.k8s.io"
	uniquePortRule   = "self.all(p1, self.exists_one(p2, p1.number==p2.number))"
	uniquePortMsg    = "port number must be unique"
	eppPortRule      = "self.kind != 'Service' || has(self.port)"
	eppPortMsg       = "port is required when kind is 'Service' or unspecified (defaults to 'Service')"
	groupPattern     = `^$|^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`
	kindPattern      = `^[a-zA-Z]([-a-zA-Z0-9]*[a-zA-Z0-9])?$`
	namespacePattern = `^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	labelValuePatt   = `^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$`
	controllerPatt   = `^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*\/[A-Za-z0-9\/\-._~%!$&'()*+,;=:]+$`
)

func loadV1CRD(t *testing.T, rev string) *apiextensionsv1.CustomResourceDefinition {
	t.Helper()
	path := filepath.Join("..", "..", "manifests", "crd", "revisions", rev, v1Group+"_inferencepools.yaml")
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%s: %v (run hack/generate-crds.sh)", rev, err)
	}
	crd := &apiextensionsv1.CustomResourceDefinition{}
	if err := yaml.UnmarshalStrict(raw, crd); err != nil {
		t.Fatalf("%s: %s is no CRD: %v", rev, path, err)
	}
	return crd
}

// schemaAt walks properties (and "[]" for array items) from the root schema.
func schemaAt(t *testing.T, root *apiextensionsv1.JSONSchemaProps, path string) *apiextensionsv1.JSONSchemaProps {
	t.Helper()
	cur := root
	for _, step := range strings.Split(path, ".") {
		if step == "[]" {
			if cur.Items == nil || cur.Items.Schema == nil {
				t.Fatalf("%s: no items schema at %q", path, step)
			}
			cur = cur.Items.Schema
			continue
		}
		next, ok := cur.Properties[step]
		if !ok {
			t.Fatalf("%s: no property %q", path, step)
		}
		cur = &next
	}
	return cur
}

func has(root *apiextensionsv1.JSONSchemaProps, parent, name string) bool {
	cur := root
	for _, step := range strings.Split(parent, ".") {
		if step == "[]" {
			cur = cur.Items.Schema
			continue
		}
		next := cur.Properties[step]
		cur = &next
	}
	_, ok := cur.Properties[name]
	return ok
}

func sorted(in []string) []string {
	out := append([]string(nil), in...)
	sort.Strings(out)
	return out
}

func wantRequired(t *testing.T, s *apiextensionsv1.JSONSchemaProps, where string, want ...string) {
	t.Helper()
	if got := sorted(s.Required); !reflect.DeepEqual(got, sorted(want)) && !(len(got) == 0 && len(want) == 0) {
		t.Errorf("%s: required %v, want %v", where, got, sorted(want))
	}
}

func wantDefault(t *testing.T, s *apiextensionsv1.JSONSchemaProps, where, want string) {
	t.Helper()
	if want == "" && s.Default == nil {
		return
	}
	if s.Default == nil {
		t.Errorf("%s: no default, want %s", where, want)
		return
	}
	if got := string(s.Default.Raw); got != want {
		t.Errorf("%s: default %s, want %s", where, got, want)
	}
}

func wantRules(t *testing.T, s *apiextensionsv1.JSONSchemaProps, where string, want ...apiextensionsv1.ValidationRule) {
	t.Helper()
	got := []apiextensionsv1.ValidationRule(s.XValidations)
	if len(got) == 0 && len(want) == 0 {
		return
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("%s: x-kubernetes-validations %+v, want %+v", where, got, want)
	}
}

func wantString(t *testing.T, s *apiextensionsv1.JSONSchemaProps, where string, minLen, maxLen int64, pattern string) {
	t.Helper()
	if s.Type != "string" {
		t.Errorf("%s: type %q, want string", where, s.Type)
	}
	if s.MinLength == nil || *s.MinLength != minLen {
		t.Errorf("%s: minLength %s, want %d", where, num(s.MinLength), minLen)
	}
	if s.MaxLength == nil || *s.MaxLength != maxLen {
		t.Errorf("%s: maxLength %s, want %d", where, num(s.MaxLength), maxLen)
	}
	if s.Pattern != pattern {
		t.Errorf("%s: pattern %q, want %q", where, s.Pattern, pattern)
	}
}

func wantPort(t *testing.T, s *apiextensionsv1.JSONSchemaProps, where string) {
	t.Helper()
	wantRequired(t, s, where, "number")
	n := s.Properties["number"]
	if n.Type != "integer" || n.Format != "int32" || n.Minimum == nil || *n.Minimum != 1 || n.Maximum == nil || *n.Maximum != 65535 {
		t.Errorf("%s.number: %s/%s %s..%s, want an int32 in 1..65535", where, n.Type, n.Format, num(n.Minimum), num(n.Maximum))
	}
}

func wantEnum(t *testing.T, s *apiextensionsv1.JSONSchemaProps, where string, want ...string) {
	t.Helper()
	var got []string
	for _, e := range s.Enum {
		var v string
		if err := json.Unmarshal(e.Raw, &v); err != nil {
			t.Fatalf("%s: enum value %s: %v", where, e.Raw, err)
		}
		got = append(got, v)
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("%s: enum %v, want %v", where, got, want)
	}
}

func intPtrIs(p *int64, want int64) bool { return p != nil && *p == want }

// str prints an optional string: its value, or "none".
func str(p *string) string {
	if p == nil {
		return "none"
	}
	return *p
}

// num prints an optional bound: its value, or "none".
func num[T int64 | float64](p *T) string {
	if p == nil {
		return "none"
	}
	return fmt.Sprint(*p)
}

func TestV1CRDResource(t *testing.T) {
	for _, rev := range v1Revisions {
		t.Run(rev.name, func(t *testing.T) {
			crd := loadV1CRD(t, rev.name)
			if crd.Name != "inferencepools."+v1Group || crd.Spec.Group != v1Group {
				t.Errorf("name %q group %q", crd.Name, crd.Spec.Group)
			}
			if got := crd.Annotations["inference.networking.k8s.io/bundle-version"]; got != rev.bundleVersion {
				t.Errorf("bundle-version annotation %q, want %q", got, rev.bundleVersion)
			}
			// The API server refuses a CRD in a *.k8s.io group without it.
			if crd.Annotations["api-approved.kubernetes.io"] == "" {
				t.Errorf("no api-approved.kubernetes.io annotation: the API server would refuse the CRD")
			}
			n := crd.Spec.Names
			if n.Kind != "InferencePool" || n.ListKind != "InferencePoolList" || n.Plural != "inferencepools" ||
				n.Singular != "inferencepool" || !reflect.DeepEqual(n.ShortNames, []string{"infpool"}) {
				t.Errorf("names %+v", n)
			}
			if crd.Spec.Scope != apiextensionsv1.NamespaceScoped {
				t.Errorf("scope %q, want Namespaced", crd.Spec.Scope)
			}
			if len(crd.Spec.Versions) != 1 {
				t.Fatalf("%d versions, want 1", len(crd.Spec.Versions))
			}
			v := crd.Spec.Versions[0]
			if v.Name != "v1" || !v.Served || !v.Storage {
				t.Errorf("version %q served=%v storage=%v, want v1 served storage", v.Name, v.Served, v.Storage)
			}
			if v.Subresources == nil || v.Subresources.Status == nil || v.Subresources.Scale != nil {
				t.Errorf("subresources %+v, want status only", v.Subresources)
			}
			wantRequired(t, v.Schema.OpenAPIV3Schema, "root", "spec")
		})
	}
}

func TestV1CRDSpec(t *testing.T) {
	for _, rev := range v1Revisions {
		t.Run(rev.name, func(t *testing.T) {
			root := loadV1CRD(t, rev.name).Spec.Versions[0].Schema.OpenAPIV3Schema
			spec := schemaAt(t, root, "spec")
			required := []string{"selector", "targetPorts"}
			if rev.eppRequired {
				required = append(required, "endpointPickerRef")
			}
			wantRequired(t, spec, "spec", required...)

			// selector.matchLabels
			wantRequired(t, schemaAt(t, root, "spec.selector"), "spec.selector", "matchLabels")
			ml := schemaAt(t, root, "spec.selector.matchLabels")
			if ml.Type != "object" || ml.AdditionalProperties == nil || ml.AdditionalProperties.Schema == nil {
				t.Fatalf("matchLabels is not a map of strings: %+v", ml)
			}
			wantString(t, ml.AdditionalProperties.Schema, "matchLabels values", 0, 63, labelValuePatt)
			if rev.boundedLabels {
				if !intPtrIs(ml.MinProperties, 1) || !intPtrIs(ml.MaxProperties, 64) {
					t.Errorf("matchLabels properties %s..%s, want 1..64", num(ml.MinProperties), num(ml.MaxProperties))
				}
			} else if ml.MinProperties != nil || ml.MaxProperties != nil {
				t.Errorf("matchLabels bounded %s..%s, want unbounded ({} accepted)", num(ml.MinProperties), num(ml.MaxProperties))
			}

			// targetPorts
			tp := schemaAt(t, root, "spec.targetPorts")
			if tp.Type != "array" || !intPtrIs(tp.MinItems, 1) || !intPtrIs(tp.MaxItems, rev.maxPorts) {
				t.Errorf("targetPorts %s %s..%s, want array 1..%d", tp.Type, num(tp.MinItems), num(tp.MaxItems), rev.maxPorts)
			}
			if tp.XListType == nil || *tp.XListType != "atomic" {
				t.Errorf("targetPorts list type %s, want atomic", str(tp.XListType))
			}
			wantPort(t, tp.Items.Schema, "targetPorts[]")
			if rev.uniquePorts {
				wantRules(t, tp, "targetPorts", apiextensionsv1.ValidationRule{Rule: uniquePortRule, Message: uniquePortMsg})
			} else {
				wantRules(t, tp, "targetPorts")
			}

			// appProtocol
			if rev.appProtocol {
				ap := schemaAt(t, root, "spec.appProtocol")
				wantEnum(t, ap, "appProtocol", "http", "kubernetes.io/h2c")
				wantDefault(t, ap, "appProtocol", `"http"`)
			} else if has(root, "spec", "appProtocol") {
				t.Errorf("spec.appProtocol exists; this revision has none")
			}

			// endpointPickerRef
			epr := schemaAt(t, root, "spec.endpointPickerRef")
			wantRequired(t, epr, "endpointPickerRef", "name")
			wantRules(t, epr, "endpointPickerRef", apiextensionsv1.ValidationRule{Rule: eppPortRule, Message: eppPortMsg})
			wantString(t, schemaAt(t, root, "spec.endpointPickerRef.name"), "endpointPickerRef.name", 1, 253, "")
			g := schemaAt(t, root, "spec.endpointPickerRef.group")
			wantString(t, g, "endpointPickerRef.group", 0, 253, groupPattern)
			wantDefault(t, g, "endpointPickerRef.group", `""`)
			k := schemaAt(t, root, "spec.endpointPickerRef.kind")
			wantString(t, k, "endpointPickerRef.kind", 1, 63, kindPattern)
			wantDefault(t, k, "endpointPickerRef.kind", `"Service"`)
			wantPort(t, schemaAt(t, root, "spec.endpointPickerRef.port"), "endpointPickerRef.port")
			wantDefault(t, schemaAt(t, root, "spec.endpointPickerRef.port"), "endpointPickerRef.port", "")
			fm := schemaAt(t, root, "spec.endpointPickerRef.failureMode")
			wantEnum(t, fm, "failureMode", "FailOpen", "FailClose")
			wantDefault(t, fm, "failureMode", `"FailClose"`)
		})
	}
}

func TestV1CRDStatus(t *testing.T) {
	for _, rev := range v1Revisions {
		t.Run(rev.name, func(t *testing.T) {
			root := loadV1CRD(t, rev.name).Spec.Versions[0].Schema.OpenAPIV3Schema
			st := schemaAt(t, root, "status")
			wantDefault(t, st, "status", "") // no placeholder parent in v1
			wantRequired(t, st, "status")
			parents := schemaAt(t, root, "status.parents")
			wantDefault(t, parents, "status.parents", "")
			if !intPtrIs(parents.MaxItems, 32) || parents.MinItems != nil {
				t.Errorf("status.parents items %s..%s, want at most 32", num(parents.MinItems), num(parents.MaxItems))
			}
			if parents.XListType == nil || *parents.XListType != "atomic" {
				t.Errorf("status.parents list type %s, want atomic", str(parents.XListType))
			}
			entry := schemaAt(t, root, "status.parents.[]")
			wantRequired(t, entry, "status.parents[]", "parentRef")

			ref := schemaAt(t, root, "status.parents.[].parentRef")
			wantRequired(t, ref, "parentRef", "name")
			g := schemaAt(t, root, "status.parents.[].parentRef.group")
			wantString(t, g, "parentRef.group", 0, 253, groupPattern)
			wantDefault(t, g, "parentRef.group", `"gateway.networking.k8s.io"`)
			k := schemaAt(t, root, "status.parents.[].parentRef.kind")
			wantString(t, k, "parentRef.kind", 1, 63, kindPattern)
			wantDefault(t, k, "parentRef.kind", `"Gateway"`)
			wantString(t, schemaAt(t, root, "status.parents.[].parentRef.name"), "parentRef.name", 1, 253, "")
			ns := schemaAt(t, root, "status.parents.[].parentRef.namespace")
			wantString(t, ns, "parentRef.namespace", 1, 63, namespacePattern)
			wantDefault(t, ns, "parentRef.namespace", "")

			conds := schemaAt(t, root, "status.parents.[].conditions")
			wantDefault(t, conds, "conditions", "") // no default condition in v1
			if !intPtrIs(conds.MaxItems, 8) {
				t.Errorf("conditions maxItems %s, want 8", num(conds.MaxItems))
			}
			if conds.XListType == nil || *conds.XListType != "map" || !reflect.DeepEqual(conds.XListMapKeys, []string{"type"}) {
				t.Errorf("conditions list type %s keys %v, want map keyed by type", str(conds.XListType), conds.XListMapKeys)
			}
			wantRequired(t, conds.Items.Schema, "conditions[]", "type", "status", "lastTransitionTime", "reason", "message")

			if rev.controllerNm {
				wantString(t, schemaAt(t, root, "status.parents.[].controllerName"), "controllerName", 1, 253, controllerPatt)
			} else if has(root, "status.parents.[]", "controllerName") {
				t.Errorf("status.parents[].controllerName exists; this revision has none")
			}
		})
	}
}

// TestV1RevisionsDiffer pins which facts set the revisions apart, so that two
// revisions that SPEC section 8 tells apart never generate the same schema.
func TestV1RevisionsDiffer(t *testing.T) {
	seen := map[string]string{}
	for _, rev := range v1Revisions {
		crd := loadV1CRD(t, rev.name)
		raw, err := json.Marshal(crd.Spec.Versions[0].Schema.OpenAPIV3Schema)
		if err != nil {
			t.Fatal(err)
		}
		if other, ok := seen[string(raw)]; ok {
			t.Errorf("revisions %s and %s have the same schema", other, rev.name)
		}
		seen[string(raw)] = rev.name
	}
}

func TestV1SchemesRegisterTheSameKinds(t *testing.T) {
	gv := schema.GroupVersion{Group: v1Group, Version: "v1"}
	for _, rev := range v1Revisions {
		scheme := runtime.NewScheme()
		if err := rev.addToScheme(scheme); err != nil {
			t.Fatalf("%s: AddToScheme: %v", rev.name, err)
		}
		for _, kind := range []string{"InferencePool", "InferencePoolList"} {
			if !scheme.Recognizes(gv.WithKind(kind)) {
				t.Errorf("%s: scheme does not recognise %s", rev.name, gv.WithKind(kind))
			}
		}
	}
}

// TestV1JSONNames checks the wire names of the Go types against the v1 field
// names (selector.matchLabels, targetPorts[].number, endpointPickerRef.port.number,
// status.parents[].parentRef, controllerName).
func TestV1JSONNames(t *testing.T) {
	group := v1common.Group("gateway.networking.k8s.io")
	pool := &v16.InferencePool{
		ObjectMeta: metav1.ObjectMeta{Name: "pool", Namespace: "ns"},
		Spec: v16.InferencePoolSpec{
			Selector:    v1common.LabelSelector{MatchLabels: map[v1common.LabelKey]v1common.LabelValue{"app": "model"}},
			TargetPorts: []v1common.Port{{Number: 8000}},
			AppProtocol: v1common.AppProtocolH2C,
			EndpointPickerRef: &v1common.EndpointPickerRef{
				Name: "epp", Port: &v1common.Port{Number: 9002}, FailureMode: v1common.EndpointPickerFailOpen,
			},
		},
		Status: v1common.InferencePoolStatus{Parents: []v1common.ParentStatus{{
			ParentRef:      v1common.ParentReference{Group: &group, Kind: "Gateway", Name: "gw", Namespace: "gws"},
			ControllerName: "example.com/gateway",
			Conditions: []metav1.Condition{{Type: string(v1common.InferencePoolConditionAccepted), Status: metav1.ConditionTrue,
				Reason: string(v1common.InferencePoolReasonAccepted)}},
		}}},
	}
	raw, err := json.Marshal(pool)
	if err != nil {
		t.Fatal(err)
	}
	var obj map[string]any
	if err := json.Unmarshal(raw, &obj); err != nil {
		t.Fatal(err)
	}
	get := func(path ...any) any {
		var cur any = obj
		for _, p := range path {
			switch p := p.(type) {
			case string:
				cur = cur.(map[string]any)[p]
			case int:
				cur = cur.([]any)[p]
			}
		}
		return cur
	}
	for _, c := range []struct {
		path []any
		want any
	}{
		{[]any{"spec", "selector", "matchLabels", "app"}, "model"},
		{[]any{"spec", "targetPorts", 0, "number"}, float64(8000)},
		{[]any{"spec", "appProtocol"}, "kubernetes.io/h2c"},
		{[]any{"spec", "endpointPickerRef", "name"}, "epp"},
		{[]any{"spec", "endpointPickerRef", "port", "number"}, float64(9002)},
		{[]any{"spec", "endpointPickerRef", "failureMode"}, "FailOpen"},
		{[]any{"status", "parents", 0, "parentRef", "namespace"}, "gws"},
		{[]any{"status", "parents", 0, "controllerName"}, "example.com/gateway"},
		{[]any{"status", "parents", 0, "conditions", 0, "type"}, "Accepted"},
	} {
		if got := get(c.path...); got != c.want {
			t.Errorf("%v: %v, want %v (JSON %s)", c.path, got, c.want, raw)
		}
	}
	// Left-out optional fields stay out, so the API server's defaults apply.
	ref := get("spec", "endpointPickerRef").(map[string]any)
	for _, k := range []string{"group", "kind"} {
		if _, ok := ref[k]; ok {
			t.Errorf("endpointPickerRef.%s is sent although it was left out: %s", k, raw)
		}
	}
}

func TestDeepCopyOfV1PoolIsIndependent(t *testing.T) {
	in := &v10.InferencePool{
		ObjectMeta: metav1.ObjectMeta{Name: "pool", Namespace: "ns"},
		Spec: v10.InferencePoolSpec{
			Selector:          v10.LabelSelector{MatchLabels: map[v1common.LabelKey]v1common.LabelValue{"app": "model"}},
			TargetPorts:       []v1common.Port{{Number: 8000}},
			EndpointPickerRef: v1common.EndpointPickerRef{Name: "epp", Port: &v1common.Port{Number: 9002}},
		},
		Status: v10.InferencePoolStatus{Parents: []v10.ParentStatus{{
			ParentRef:  v1common.ParentReference{Name: "gw"},
			Conditions: []metav1.Condition{{Type: "Accepted", Status: metav1.ConditionTrue, Reason: "Accepted"}},
		}}},
	}
	out := in.DeepCopy()
	out.Spec.Selector.MatchLabels["app"] = "changed"
	out.Spec.TargetPorts[0].Number = 1
	out.Spec.EndpointPickerRef.Port.Number = 1
	out.Status.Parents[0].Conditions[0].Reason = "Changed"
	if in.Spec.Selector.MatchLabels["app"] != "model" || in.Spec.TargetPorts[0].Number != 8000 ||
		in.Spec.EndpointPickerRef.Port.Number != 9002 || in.Status.Parents[0].Conditions[0].Reason != "Accepted" {
		t.Errorf("the copy shares memory with the original: %+v", in)
	}
}
