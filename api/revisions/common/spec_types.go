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

package common

// InferencePoolSpec is what a user asks of an InferencePool: which pods serve
// the models, on which port, and which endpoint picker chooses among them.
type InferencePoolSpec struct {
	// Selector picks the model server pods of the pool, in the pool's own
	// namespace, by their labels. It is a plain label map (as a Service
	// selector is) rather than a LabelSelector.
	//
	// +kubebuilder:validation:Required
	Selector map[LabelKey]LabelValue `json:"selector"`

	// TargetPortNumber is the port the selected model servers listen on.
	//
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=65535
	// +kubebuilder:validation:Required
	TargetPortNumber int32 `json:"targetPortNumber"`

	// EndpointPickerConfig says how to reach the endpoint picker.
	EndpointPickerConfig `json:",inline"`
}

// EndpointPickerConfig says how a gateway reaches the endpoint picker of a
// pool. Only one way exists so far: an extension service.
type EndpointPickerConfig struct {
	// ExtensionRef names the service that runs the endpoint picker.
	//
	// +kubebuilder:validation:Required
	ExtensionRef *Extension `json:"extensionRef,omitempty"`
}

// Extension is an endpoint picker run as a service next to the gateway.
type Extension struct {
	// ExtensionReference names the object that runs the extension.
	ExtensionReference `json:",inline"`

	// ExtensionConnection says how the gateway talks to the extension.
	ExtensionConnection `json:",inline"`
}

// ExtensionReference names the object (normally a Service) that runs the
// endpoint picker.
type ExtensionReference struct {
	// Group of the object; empty for the core group.
	//
	// +optional
	// +kubebuilder:default=""
	Group *Group `json:"group,omitempty"`

	// Kind of the object; Service when left out. Services of type
	// ExternalName are not to be supported by implementations.
	//
	// +optional
	// +kubebuilder:default=Service
	Kind *Kind `json:"kind,omitempty"`

	// Name of the object, in the pool's namespace.
	//
	// +kubebuilder:validation:Required
	Name ObjectName `json:"name"`

	// PortNumber of the extension on that object. Left out, implementations
	// are expected to use 9002 for a Service; the API server fills in nothing.
	//
	// +optional
	PortNumber *PortNumber `json:"portNumber,omitempty"`
}

// ExtensionConnection holds the options of the connection to the extension.
type ExtensionConnection struct {
	// FailureMode says what the gateway does with a request while the
	// extension does not answer; FailClose when left out.
	//
	// +optional
	// +kubebuilder:default="FailClose"
	FailureMode *ExtensionFailureMode `json:"failureMode"`
}

// ExtensionFailureMode is what a gateway does while the extension is not
// responding.
//
// +kubebuilder:validation:Enum=FailOpen;FailClose
type ExtensionFailureMode string

const (
	// FailOpen: forward the request to an endpoint of the gateway's choosing.
	FailOpen ExtensionFailureMode = "FailOpen"
	// FailClose: drop the request.
	FailClose ExtensionFailureMode = "FailClose"
)
