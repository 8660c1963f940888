"""The cluster proxy: the hub forwards requests to a member over the tunnel its agent keeps open."""
