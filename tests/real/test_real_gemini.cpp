// placeholder until the Gemini suite lands
#include <gtest/gtest.h>
