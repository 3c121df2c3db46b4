#include "gpucache/runtime.hpp"
