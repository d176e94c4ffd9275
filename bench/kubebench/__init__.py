"""kubebench: kubesched side by side with kube-scheduler 1.20 and a null binder on one local API server."""
