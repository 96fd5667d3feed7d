"""What the emulated API server does to the objects it stores, as kube-apiserver's registry
and storage do (and its garbage collector): `store.Store` and the rules it applies."""
