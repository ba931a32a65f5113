// The facade (core/api): workers and the network: the cluster token, worker discovery (signed
// beacons), TLS pins, and downloads from the Hugging Face Hub.
#pragma once

#include "core/cluster/beacon.h"
#include "core/cluster/cluster_token.h"
#include "core/cluster/discovery.h"
#include "core/cluster/tls.h"
#include "core/hub/hub_download.h"
