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

package v1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/inferencepool-conformance/api/revisions/v1common"
)

// InferencePoolSpec is what a user asks of a pool in v1.0.2: as in v1.0.0,
// except that the selector needs 1 to 64 labels.
type InferencePoolSpec struct {
	// Selector picks the model server pods of the pool, in the namespace of
	// the pool, by their labels.
	//
	// +required
	Selector v1common.LabelSelector `json:"selector"`

	// TargetPorts are the ports the model servers listen on. This revision
	// allows exactly one.
	//
	// +required
	// +listType=atomic
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=1
	TargetPorts []v1common.Port `json:"targetPorts,omitempty"`

	// EndpointPickerRef names the endpoint picker of the pool. Every pool of
	// this revision has one.
	//
	// +required
	EndpointPickerRef v1common.EndpointPickerRef `json:"endpointPickerRef"`
}

// InferencePoolStatus is what the parents of the pool report about it, in
// the form released before v1.1 (no controllerName in the entries).
type InferencePoolStatus struct {
	// Parents has one entry per parent that reports on the pool, at most 32.
	// Nothing is filled in by the API server: a pool no controller has
	// looked at has no entries. The list is replaced as a whole on apply.
	//
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=32
	Parents []ParentStatus `json:"parents,omitempty"`
}

// ParentStatus is the state of the pool as one parent sees it.
type ParentStatus struct {
	// Conditions of the pool for this parent, at most 8, at most one of each
	// type.
	//
	// +optional
	// +listType=map
	// +listMapKey=type
	// +kubebuilder:validation:MaxItems=8
	Conditions []metav1.Condition `json:"conditions,omitempty"`

	// ParentRef names the parent this entry is about.
	//
	// +required
	ParentRef v1common.ParentReference `json:"parentRef"`
}
