module gpu-portal/tools/loadclient

go 1.26.8
