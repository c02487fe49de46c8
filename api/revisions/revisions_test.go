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
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/inferencepool-conformance/api/revisions/common"
	v02 "github.com/inferencepool-conformance/api/revisions/v0_2/v1alpha2"
	v05 "github.com/inferencepool-conformance/api/revisions/v0_5/v1alpha2"
)

func TestSchemesRegisterTheSameKinds(t *testing.T) {
	for name, add := range map[string]func(*runtime.Scheme) error{"v0.2": v02.AddToScheme, "v0.5": v05.AddToScheme} {
		scheme := runtime.NewScheme()
		if err := add(scheme); err != nil {
			t.Fatalf("%s: AddToScheme: %v", name, err)
		}
		gv := schema.GroupVersion{Group: "inference.networking.x-k8s.io", Version: "v1alpha2"}
		for _, kind := range []string{"InferencePool", "InferencePoolList"} {
			if !scheme.Recognizes(gv.WithKind(kind)) {
				t.Errorf("%s: scheme does not recognise %s", name, gv.WithKind(kind))
			}
		}
	}
}

func TestDeepCopyOfV05StatusIsIndependent(t *testing.T) {
	group, kind, ns := common.Group("gateway.networking.k8s.io"), common.Kind("Gateway"), common.Namespace("ns")
	in := &v05.InferencePool{
		ObjectMeta: metav1.ObjectMeta{Name: "pool", Namespace: "ns"},
		Spec: common.InferencePoolSpec{
			Selector:         map[common.LabelKey]common.LabelValue{"app": "model"},
			TargetPortNumber: 8000,
			EndpointPickerConfig: common.EndpointPickerConfig{
				ExtensionRef: &common.Extension{ExtensionReference: common.ExtensionReference{Name: "epp"}},
			},
		},
		Status: v05.InferencePoolStatus{Parents: []v05.PoolStatus{{
			GatewayRef: v05.ParentGatewayReference{Group: &group, Kind: &kind, Name: "gw", Namespace: &ns},
			Conditions: []metav1.Condition{{Type: "Accepted", Status: metav1.ConditionTrue, Reason: "Accepted"}},
		}}},
	}
	out := in.DeepCopy()
	*out.Status.Parents[0].GatewayRef.Namespace = "other"
	out.Status.Parents[0].Conditions[0].Reason = "Changed"
	out.Spec.Selector["app"] = "changed"
	out.Spec.ExtensionRef.Name = "changed"
	if *in.Status.Parents[0].GatewayRef.Namespace != "ns" || in.Status.Parents[0].Conditions[0].Reason != "Accepted" ||
		in.Spec.Selector["app"] != "model" || in.Spec.ExtensionRef.Name != "epp" {
		t.Errorf("the copy shares memory with the original: %+v", in)
	}
}
