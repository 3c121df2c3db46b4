// Which compute backend runs validation and conversion, and whether a CUDA device is usable.
#pragma once

#include <string>

namespace gpucache {

enum class Device { automatic, cpu, cuda };

// True when this build has the CUDA backend and the process can see at least one GPU.
bool cuda_available() noexcept;
// Resolves Device::automatic to cuda or cpu; throws gpucache::Error when cuda is requested but
// not usable. `reason` receives a human-readable line for the log ("cuda:0 NVIDIA H200").
Device resolve_device(Device requested, std::string* reason = nullptr);

}  // namespace gpucache
