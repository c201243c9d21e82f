package kube

import metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

var metav1PatchOptions = metav1.PatchOptions{}
