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
	"github.com/inferencepool-conformance/api/revisions/v1common"
)

// InferencePoolSpec is what a user asks of a pool in v1.6.x: as in v1.4,
// except that the endpoint picker reference is optional.
type InferencePoolSpec struct {
	// Selector picks the model server pods of the pool, in the namespace of
	// the pool, by their labels.
	//
	// +required
	Selector v1common.LabelSelector `json:"selector"`

	// TargetPorts are the ports the model servers listen on, 1 to 8 of them,
	// each number at most once. An endpoint picker may pick any of them.
	//
	// +required
	// +listType=atomic
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=8
	// +kubebuilder:validation:XValidation:rule="self.all(p1, self.exists_one(p2, p1.number==p2.number))",message="port number must be unique"
	TargetPorts []v1common.Port `json:"targetPorts,omitempty"`

	// AppProtocol is the protocol a gateway speaks to the model servers;
	// http when left out.
	//
	// +optional
	// +kubebuilder:validation:Enum=http;"kubernetes.io/h2c"
	// +kubebuilder:default="http"
	AppProtocol v1common.AppProtocol `json:"appProtocol,omitempty"`

	// EndpointPickerRef names the endpoint picker of the pool. It may be left
	// out: what a gateway then does is up to the gateway, which may refuse
	// the pool (Accepted False, reason EndpointPickerRefMissing).
	//
	// +optional
	EndpointPickerRef *v1common.EndpointPickerRef `json:"endpointPickerRef,omitempty"`
}
