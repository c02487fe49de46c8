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

// Package v1common holds the parts of the InferencePool v1 API
// (inference.networking.k8s.io) that several of its published revisions share:
// the validated names and numbers, the endpoint picker reference, the status
// parent reference, the bounded label selector (v1.0.2 on) and the status with
// a controllerName (v1.1 on), and the condition types and reasons.
//
// Like ../common, it carries no groupName marker: it is a source of types for
// the revision packages, which controller-gen inlines into their CRDs.
//
// +kubebuilder:object:generate=true
package v1common
