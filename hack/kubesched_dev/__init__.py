"""Development machinery: the local control plane, and fixtures shared by tests, bench and demo."""
