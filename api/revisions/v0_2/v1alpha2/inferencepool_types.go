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
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/inferencepool-conformance/api/revisions/common"
)

// InferencePool is a pool of model servers that a gateway sends inference
// requests to, through an endpoint picker.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:storageversion
type InferencePool struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   common.InferencePoolSpec `json:"spec,omitempty"`
	Status InferencePoolStatus      `json:"status,omitempty"`
}

// InferencePoolList is a list of InferencePools.
//
// +kubebuilder:object:root=true
type InferencePoolList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []InferencePool `json:"items"`
}

// InferencePoolStatus is what the gateways that use the pool report about it.
type InferencePoolStatus struct {
	// Parents holds one entry per parent (normally a Gateway) that reports on
	// the pool; at most 32.
	//
	// +kubebuilder:validation:MaxItems=32
	Parents []PoolStatus `json:"parent,omitempty"`
}

// PoolStatus is the state of the pool as one parent sees it.
type PoolStatus struct {
	// GatewayRef names the parent this entry is about.
	GatewayRef corev1.ObjectReference `json:"parentRef"`

	// Conditions of the pool for this parent. Left out, they default to a
	// single Accepted condition with status Unknown, waiting for a controller.
	//
	// +optional
	// +listType=map
	// +listMapKey=type
	// +kubebuilder:validation:MaxItems=8
	// +kubebuilder:default={{type: "Accepted", status: "Unknown", reason: "Pending", message: "Waiting for controller", lastTransitionTime: "1970-01-01T00:00:00Z"}}
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// InferencePoolConditionType is the type of a condition of a pool.
type InferencePoolConditionType string

// InferencePoolReason is the reason of a condition of a pool.
type InferencePoolReason string

const (
	// InferencePoolConditionAccepted says whether a parent accepted the pool.
	InferencePoolConditionAccepted InferencePoolConditionType = "Accepted"
	// InferencePoolReasonAccepted goes with Accepted True.
	InferencePoolReasonAccepted InferencePoolReason = "Accepted"
	// InferencePoolReasonNotSupportedByGateway goes with Accepted False when the
	// Gateway cannot use a pool as a backend.
	InferencePoolReasonNotSupportedByGateway InferencePoolReason = "NotSupportedByGateway"
	// InferencePoolReasonPending goes with Accepted Unknown until a controller
	// has looked at the pool.
	InferencePoolReasonPending InferencePoolReason = "Pending"

	// InferencePoolConditionResolvedRefs says whether the references of the
	// pool (its extensionRef) could be resolved.
	InferencePoolConditionResolvedRefs InferencePoolConditionType = "ResolvedRefs"
	// InferencePoolReasonResolvedRefs goes with ResolvedRefs True.
	InferencePoolReasonResolvedRefs InferencePoolReason = "ResolvedRefs"
	// InferencePoolReasonInvalidExtensionRef goes with ResolvedRefs False: the
	// extensionRef names an unsupported kind or group, or nothing that exists.
	InferencePoolReasonInvalidExtensionRef InferencePoolReason = "InvalidExtensionRef"
)
