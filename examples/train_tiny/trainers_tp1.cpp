#include "tiny.hpp"

template TINY_TRAINERS(1);
