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

package v1common

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Group is an API group: empty for the core group, otherwise a DNS subdomain
// of at most 253 characters.
//
// +kubebuilder:validation:MinLength=0
// +kubebuilder:validation:MaxLength=253
// +kubebuilder:validation:Pattern=`^$|^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`
type Group string

// Kind is an object kind: 1 to 63 letters, digits and dashes, a letter first
// and no dash last.
//
// +kubebuilder:validation:MinLength=1
// +kubebuilder:validation:MaxLength=63
// +kubebuilder:validation:Pattern=`^[a-zA-Z]([-a-zA-Z0-9]*[a-zA-Z0-9])?$`
type Kind string

// ObjectName is the name of an object, 1 to 253 characters.
//
// +kubebuilder:validation:MinLength=1
// +kubebuilder:validation:MaxLength=253
type ObjectName string

// Namespace is the name of a namespace: a DNS label of 1 to 63 lower-case
// letters, digits and dashes, with no dash at either end.
//
// +kubebuilder:validation:MinLength=1
// +kubebuilder:validation:MaxLength=63
// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
type Namespace string

// PortNumber is a TCP port, 1 to 65535.
//
// +kubebuilder:validation:Minimum=1
// +kubebuilder:validation:Maximum=65535
type PortNumber int32

// LabelKey is a label key. The markers document it; controller-gen emits no
// schema for map keys, so the CRD leaves selector keys unchecked.
//
// +kubebuilder:validation:MinLength=1
// +kubebuilder:validation:MaxLength=253
// +kubebuilder:validation:Pattern=`^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?([A-Za-z0-9][-A-Za-z0-9_.]{0,61})?[A-Za-z0-9]$`
type LabelKey string

// LabelValue is a label value: empty, or at most 63 letters, digits, '-', '_'
// and '.', with a letter or digit at both ends.
//
// +kubebuilder:validation:MinLength=0
// +kubebuilder:validation:MaxLength=63
// +kubebuilder:validation:Pattern=`^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$`
type LabelValue string

// ControllerName names a controller, as a GatewayClass's spec.controllerName
// does: a domain, a slash, and a path (for example example.com/gateway).
//
// +kubebuilder:validation:MinLength=1
// +kubebuilder:validation:MaxLength=253
// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*\/[A-Za-z0-9\/\-._~%!$&'()*+,;=:]+$`
type ControllerName string

// Port is one port, by number.
type Port struct {
	// Number of the port.
	//
	// +required
	Number PortNumber `json:"number"`
}

// LabelSelector picks pods by exact label matches. This is the bounded form
// released from v1.0.2 on: 1 to 64 labels, so an empty selector that would
// match every pod of the namespace is refused.
type LabelSelector struct {
	// MatchLabels are the labels a pod must carry, every one with the given
	// value, to belong to the pool.
	//
	// +required
	// +kubebuilder:validation:MinProperties=1
	// +kubebuilder:validation:MaxProperties=64
	MatchLabels map[LabelKey]LabelValue `json:"matchLabels"`
}

// AppProtocol is the protocol a gateway speaks to the model servers of a pool.
type AppProtocol string

const (
	// AppProtocolHTTP is HTTP/1.1, the value the API server fills in.
	AppProtocolHTTP AppProtocol = "http"
	// AppProtocolH2C is HTTP/2 over cleartext TCP, with prior knowledge.
	AppProtocolH2C AppProtocol = "kubernetes.io/h2c"
)

// EndpointPickerRef names the extension that picks an endpoint of the pool
// for each request, and how a gateway talks to it. When the kind is Service
// (as it is when left out), the port must be given.
//
// +kubebuilder:validation:XValidation:rule="self.kind != 'Service' || has(self.port)",message="port is required when kind is 'Service' or unspecified (defaults to 'Service')"
type EndpointPickerRef struct {
	// Group of the referenced object; the API server fills in "" (the core
	// group) when it is left out.
	//
	// +optional
	// +kubebuilder:default=""
	Group *Group `json:"group,omitempty"`

	// Kind of the referenced object; Service when left out. A Service of type
	// ExternalName is not to be supported by implementations.
	//
	// +optional
	// +kubebuilder:default=Service
	Kind Kind `json:"kind,omitempty"`

	// Name of the referenced object, in the namespace of the pool.
	//
	// +required
	Name ObjectName `json:"name"`

	// Port the extension listens on. The schema demands it whenever the kind
	// is Service.
	//
	// +optional
	Port *Port `json:"port,omitempty"`

	// FailureMode says what a gateway does with a request while the extension
	// does not answer; FailClose when left out.
	//
	// +optional
	// +kubebuilder:default="FailClose"
	FailureMode EndpointPickerFailureMode `json:"failureMode,omitempty"`
}

// EndpointPickerFailureMode is what a gateway does with a request while the
// endpoint picker is unreachable or not answering.
//
// +kubebuilder:validation:Enum=FailOpen;FailClose
type EndpointPickerFailureMode string

const (
	// EndpointPickerFailOpen: serve the request anyway, from an endpoint of
	// the pool the gateway chooses itself.
	EndpointPickerFailOpen EndpointPickerFailureMode = "FailOpen"
	// EndpointPickerFailClose: refuse the request.
	EndpointPickerFailClose EndpointPickerFailureMode = "FailClose"
)

// ParentReference names the parent of a status entry: the object (normally a
// Gateway) through which the pool receives traffic.
type ParentReference struct {
	// Group of the parent; gateway.networking.k8s.io when left out.
	//
	// +optional
	// +kubebuilder:default="gateway.networking.k8s.io"
	Group *Group `json:"group,omitempty"`

	// Kind of the parent; Gateway when left out.
	//
	// +optional
	// +kubebuilder:default=Gateway
	Kind Kind `json:"kind,omitempty"`

	// Name of the parent.
	//
	// +required
	Name ObjectName `json:"name"`

	// Namespace of the parent. Left out, the parent is in the namespace of
	// the pool.
	//
	// +optional
	Namespace Namespace `json:"namespace,omitempty"`
}

// InferencePoolStatus is what the parents of the pool report about it, in
// the form released from v1.1 on (entries may carry a controllerName).
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
	ParentRef ParentReference `json:"parentRef"`

	// ControllerName, when set, is the controllerName of the GatewayClass
	// whose controller wrote this entry.
	//
	// +optional
	ControllerName ControllerName `json:"controllerName,omitempty"`
}

// InferencePoolConditionType is the type of a condition of a pool.
type InferencePoolConditionType string

// InferencePoolReason is the reason of a condition of a pool.
type InferencePoolReason string

const (
	// InferencePoolConditionAccepted says whether the parent accepted the pool.
	InferencePoolConditionAccepted InferencePoolConditionType = "Accepted"
	// InferencePoolReasonAccepted goes with Accepted True.
	InferencePoolReasonAccepted InferencePoolReason = "Accepted"
	// InferencePoolReasonNotSupportedByParent goes with Accepted False when the
	// parent cannot use a pool as a backend.
	InferencePoolReasonNotSupportedByParent InferencePoolReason = "NotSupportedByParent"
	// InferencePoolReasonHTTPRouteNotAccepted goes with Accepted False when the
	// pool is the backend of an HTTPRoute that the parent did not accept.
	InferencePoolReasonHTTPRouteNotAccepted InferencePoolReason = "HTTPRouteNotAccepted"
	// InferencePoolReasonEndpointPickerRefMissing goes with Accepted False when
	// the pool has no endpointPickerRef and the parent needs one (v1.6 on).
	InferencePoolReasonEndpointPickerRefMissing InferencePoolReason = "EndpointPickerRefMissing"

	// InferencePoolConditionResolvedRefs says whether the references of the
	// pool (its endpointPickerRef) could be resolved.
	InferencePoolConditionResolvedRefs InferencePoolConditionType = "ResolvedRefs"
	// InferencePoolReasonResolvedRefs goes with ResolvedRefs True.
	InferencePoolReasonResolvedRefs InferencePoolReason = "ResolvedRefs"
	// InferencePoolReasonInvalidExtensionRef goes with ResolvedRefs False: the
	// endpointPickerRef names an unsupported kind or group, or nothing that
	// exists.
	InferencePoolReasonInvalidExtensionRef InferencePoolReason = "InvalidExtensionRef"

	// InferencePoolConditionExported says whether the pool is exported to
	// other clusters (v1.1 on; multi-cluster, out of the suite's scope).
	InferencePoolConditionExported InferencePoolConditionType = "Exported"
	// InferencePoolReasonExported goes with Exported True.
	InferencePoolReasonExported InferencePoolReason = "Exported"
	// InferencePoolReasonNotRequested goes with Exported False when nobody
	// asked for the pool to be exported.
	InferencePoolReasonNotRequested InferencePoolReason = "NotRequested"
	// InferencePoolReasonNotSupported goes with Exported False when the
	// controller cannot export pools.
	InferencePoolReasonNotSupported InferencePoolReason = "NotSupported"
)
