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

// Package v1alpha2 holds the InferencePool API of the
// inference.networking.x-k8s.io group, version v1alpha2.
//
// +kubebuilder:object:generate=true
// +groupName=inference.networking.x-k8s.io
package v1alpha2

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// GroupName is the API group of this package.
const GroupName = "inference.networking.x-k8s.io"

var (
	// GroupVersion is the group and version of the types in this package.
	GroupVersion = schema.GroupVersion{Group: GroupName, Version: "v1alpha2"}

	// SchemeGroupVersion is an alias of GroupVersion, the name client-gen
	// style code expects.
	SchemeGroupVersion = GroupVersion

	// SchemeBuilder collects the types of this package for a runtime.Scheme.
	SchemeBuilder = &objectSchemeBuilder{}

	// AddToScheme adds the types of this package to a runtime.Scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)

// Resource returns the GroupResource of the given resource in this group.
func Resource(resource string) schema.GroupResource {
	return GroupVersion.WithResource(resource).GroupResource()
}

// objectSchemeBuilder is a runtime.SchemeBuilder that registers API objects
// of GroupVersion, so that types can call Register with the objects
// themselves. It depends on k8s.io/apimachinery only.
//
// +kubebuilder:object:generate=false
type objectSchemeBuilder struct {
	runtime.SchemeBuilder
}

// Register queues the given objects to be added to a scheme under
// GroupVersion, together with the common meta/v1 types of that version.
func (b *objectSchemeBuilder) Register(objects ...runtime.Object) {
	b.SchemeBuilder.Register(func(scheme *runtime.Scheme) error {
		scheme.AddKnownTypes(GroupVersion, objects...)
		metav1.AddToGroupVersion(scheme, GroupVersion)
		return nil
	})
}
