"""Personal kubeconfigs: who may hold one for which team, issuing, revoking, and the
sweeper that keeps each vCluster's ServiceAccounts equal to the people allowed."""
