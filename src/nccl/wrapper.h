// Everything ginbench's Rust side needs from NCCL: the host API and the device-API host structs.
#include <nccl.h>
#include <nccl_device.h>
