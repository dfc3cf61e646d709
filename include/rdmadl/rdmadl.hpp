// SPDX-License-Identifier: MIT
/// @file
/// rdmadl/rdmadl.hpp - the whole C++ API. Includes no rdma-core header; see
/// <rdmadl/native.hpp> for that.
#ifndef RDMADL_RDMADL_HPP
#define RDMADL_RDMADL_HPP

#include "rdmadl/channel.hpp"
#include "rdmadl/cm.hpp"
#include "rdmadl/completion_channel.hpp"
#include "rdmadl/cq.hpp"
#include "rdmadl/device.hpp"
#include "rdmadl/error.hpp"
#include "rdmadl/memory.hpp"
#include "rdmadl/multi_channel.hpp"
#include "rdmadl/oob.hpp"
#include "rdmadl/qp.hpp"
#include "rdmadl/runtime.hpp"
#include "rdmadl/version.h"

/// @namespace rdmadl
/// The C++ API. Every object is a move-only handle that keeps alive what it
/// was made from; every call that can fail returns result<T>.

#endif // RDMADL_RDMADL_HPP
