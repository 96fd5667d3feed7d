"""The process kubelet: it runs the Pods bound to it as local processes and reports their
status, as a kubelet does."""
