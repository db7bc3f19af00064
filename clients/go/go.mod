module support-platform/client

go 1.21
