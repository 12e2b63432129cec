"""`dynacheck census`: every model class SGLang registers x a matrix of deployments, statically."""
