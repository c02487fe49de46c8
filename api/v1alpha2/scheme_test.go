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

package v1alpha2

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

func TestAddToScheme(t *testing.T) {
	scheme := runtime.NewScheme()
	if err := AddToScheme(scheme); err != nil {
		t.Fatalf("AddToScheme: %v", err)
	}
	for _, kind := range []string{"InferencePool", "InferencePoolList", "ListOptions"} {
		if !scheme.Recognizes(GroupVersion.WithKind(kind)) {
			t.Errorf("scheme does not recognise %s", GroupVersion.WithKind(kind))
		}
	}
	gvks, _, err := scheme.ObjectKinds(&InferencePool{})
	if err != nil || len(gvks) != 1 || gvks[0] != GroupVersion.WithKind("InferencePool") {
		t.Errorf("ObjectKinds(InferencePool) = %v, %v", gvks, err)
	}
}

func TestDeepCopyIsIndependent(t *testing.T) {
	mode := FailOpen
	port := PortNumber(9002)
	in := &InferencePool{
		ObjectMeta: metav1.ObjectMeta{Name: "pool", Namespace: "ns"},
		Spec: InferencePoolSpec{
			Selector:         map[LabelKey]LabelValue{"app": "model"},
			TargetPortNumber: 8000,
			EndpointPickerConfig: EndpointPickerConfig{ExtensionRef: &Extension{
				ExtensionReference:  ExtensionReference{Name: "epp", PortNumber: &port},
				ExtensionConnection: ExtensionConnection{FailureMode: &mode},
			}},
		},
		Status: InferencePoolStatus{Parents: []PoolStatus{{
			Conditions: []metav1.Condition{{Type: "Accepted", Status: metav1.ConditionTrue}},
		}}},
	}
	out, ok := in.DeepCopyObject().(*InferencePool)
	if !ok {
		t.Fatalf("DeepCopyObject returned %T", in.DeepCopyObject())
	}
	out.Spec.Selector["app"] = "other"
	*out.Spec.ExtensionRef.PortNumber = 1
	*out.Spec.ExtensionRef.FailureMode = FailClose
	out.Status.Parents[0].Conditions[0].Status = metav1.ConditionFalse
	if in.Spec.Selector["app"] != "model" || *in.Spec.ExtensionRef.PortNumber != 9002 ||
		*in.Spec.ExtensionRef.FailureMode != FailOpen ||
		in.Status.Parents[0].Conditions[0].Status != metav1.ConditionTrue {
		t.Errorf("changing the copy changed the original: %+v", in)
	}
}
