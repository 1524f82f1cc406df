// The plots of `gridfeed audit accounting --plot`: SVG text with named axes and ticks. Every
// drawn line carries its values in a data-values attribute ("iteration:value ...") so that
// tools and tests read the numbers, not the pixels. Pure functions; thread safe.
#pragma once

#include <string>

#include "gridfeed/audit/replay.h"

namespace gridfeed::app {

// Mixture ledgers: per stage and source the share achieved over the trailing window of
// iterations (solid) against the target share over the same positions (dashed), every stage
// named where it starts (later stages with a dashed gray boundary line).
std::string SharesSvg(const audit::Accounting& acc);

// Consumed tokens per source over the iterations. Says something only with more than one
// source (one source's tokens are the run's tokens): see TokensPlotIsInformative.
std::string TokensSvg(const audit::Accounting& acc);
bool TokensPlotIsInformative(const audit::Accounting& acc);

// Text for an SVG element or attribute: the markup characters escaped.
std::string XmlEscape(const std::string& text);

}  // namespace gridfeed::app
